/* resp: writes Redis commands in RESP, the wire format hiredis sends, so
 * the pool can format a script call once and resend it with a changed
 * head. Pure functions on caller-sized buffers: size with resp_digits and
 * resp_arg_len, then write with resp_put_num and resp_put_arg. */
#ifndef EMQ_RESP_H
#define EMQ_RESP_H

#include <stddef.h>

/* The number of decimal digits in n (1 for 0). */
size_t resp_digits(size_t n);

/* Write n in decimal at w, without a terminator; returns the end. */
char *resp_put_uint(char *w, size_t n);

/* Write a header "<mark><n>\r\n" at w (mark '*' for an array of n
 * arguments, '$' for a bulk string of n bytes); returns the end. */
char *resp_put_num(char *w, char mark, size_t n);

/* Write the n bytes at s as one bulk string argument at w; returns the
 * end. */
char *resp_put_arg(char *w, const char *s, size_t n);

/* The bytes resp_put_arg writes for an argument of n bytes. */
size_t resp_arg_len(size_t n);

#endif
