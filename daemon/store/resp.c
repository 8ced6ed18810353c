/* resp: the RESP command writer (see resp.h). */
#include "resp.h"

#include <string.h>

size_t resp_digits(size_t n)
{
    size_t d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

char *resp_put_uint(char *w, size_t n)
{
    size_t d = resp_digits(n);

    for (size_t i = d; i > 0; i--) {
        w[i - 1] = (char)('0' + n % 10);
        n /= 10;
    }
    return w + d;
}

/* "*<n>\r\n" or "$<n>\r\n". */
char *resp_put_num(char *w, char mark, size_t n)
{
    *w++ = mark;
    w = resp_put_uint(w, n);
    *w++ = '\r';
    *w++ = '\n';
    return w;
}

char *resp_put_arg(char *w, const char *s, size_t n)
{
    w = resp_put_num(w, '$', n);
    memcpy(w, s, n);
    w += n;
    *w++ = '\r';
    *w++ = '\n';
    return w;
}

size_t resp_arg_len(size_t n)
{
    return 1 + resp_digits(n) + 2 + n + 2;
}
