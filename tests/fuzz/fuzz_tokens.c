/* fuzz_tokens: one line of a tokens file through the daemon's parser
 * (tokens_check_line, what tokens_load runs per line), and queue-name
 * patterns through tokens_glob. Properties: the parser never crashes
 * and accepts only lines of at least three fields; the glob terminates,
 * '*' alone matches everything, and a pattern without '*' matches
 * exactly itself. The first byte splits the rest into pattern and name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokens.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *text = malloc(size);
    CHECK(text != NULL);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    size_t len = strlen(text); /* the parser reads NUL-terminated lines */

    if (tokens_check_line(text) == NULL) {
        size_t fields = 0;
        for (size_t i = 0; i < len; i++)
            fields += text[i] != ' ' && text[i] != '\t' &&
                      (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t');
        CHECK(fields >= 3);
    }

    size_t cut = len == 0 ? 0 : data[0] % (len + 1);
    char *pattern = strndup(text, cut);
    CHECK(pattern != NULL);
    const char *name = text + cut;
    size_t nlen = len - cut;
    bool m = tokens_glob(pattern, name, nlen);
    CHECK(tokens_glob("*", name, nlen));
    if (strchr(pattern, '*') == NULL)
        CHECK(m == (strlen(pattern) == nlen && memcmp(pattern, name, nlen) == 0));
    free(pattern);
    free(text);
    return 0;
}
