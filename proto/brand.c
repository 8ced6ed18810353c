/* brand: the id rules (see brand.h). Checked byte by byte in ASCII: no
 * locale, so a UTF-8 look-alike never passes. */
#include "brand.h"

static bool body_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
           c == '-';
}

static bool body_valid(const char *s, size_t len)
{
    if (len < 1 || len > BRAND_BODY_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!body_char((unsigned char)s[i]))
            return false;
    return true;
}

bool brand_group_valid(const char *s, size_t len)
{
    if (s == NULL || len < 4)
        return false;
    for (size_t i = 0; i < 3; i++)
        if (s[i] < 'A' || s[i] > 'Z')
            return false;
    return body_valid(s + 3, len - 3);
}

bool brand_job_kind(const char *s, size_t len)
{
    return s != NULL && len >= 3 && s[0] == 'J' && s[1] == 'O' && s[2] == 'B';
}

bool brand_job_valid(const char *s, size_t len)
{
    return brand_job_kind(s, len) && body_valid(s + 3, len - 3);
}

bool brand_queue_valid(const char *s, size_t len)
{
    if (s == NULL || len < 1 || len > BRAND_QUEUE_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(body_char(c) || c == '.'))
            return false;
    }
    return true;
}
