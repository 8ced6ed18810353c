/* fuzz.h: what every libFuzzer target here shares: the entry point
 * libFuzzer calls, and CHECK, which stops the run on a broken property
 * (a trap is a crash the fuzzer saves the input of, in every build). */
#ifndef EMQ_FUZZ_H
#define EMQ_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

#endif
