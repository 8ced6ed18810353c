/* brand: the id rules, case by case. */
#include <criterion/criterion.h>
#include <string.h>

#include "brand.h"

#define OK(f, s)  cr_assert(f(s, strlen(s)), #f "(\"%s\") should pass", s)
#define BAD(f, s) cr_assert_not(f(s, strlen(s)), #f "(\"%s\") should fail", s)

Test(brand, group_ids)
{
    OK(brand_group_valid, "TENacme-42");
    OK(brand_group_valid, "PLRx");
    OK(brand_group_valid, "ABC_-09azAZ");
    BAD(brand_group_valid, "TEN");     /* no body */
    BAD(brand_group_valid, "tenacme"); /* brand must be upper case */
    BAD(brand_group_valid, "TeNacme");
    BAD(brand_group_valid, "TEN acme"); /* space */
    BAD(brand_group_valid, "TENa}b");   /* would break out of a key */
    BAD(brand_group_valid, "TENa:b");
    BAD(brand_group_valid, "TENa.b");
    BAD(brand_group_valid, "TENé");
    BAD(brand_group_valid, "");
    cr_assert_not(brand_group_valid(NULL, 0));
    cr_assert_not(brand_group_valid("TENa\0b", 6), "an embedded NUL is refused");
}

Test(brand, body_length_bounds)
{
    char s[80];
    memset(s, 'x', sizeof(s));
    memcpy(s, "TEN", 3);
    cr_assert(brand_group_valid(s, 3 + 64));
    cr_assert_not(brand_group_valid(s, 3 + 65));
    memcpy(s, "JOB", 3);
    cr_assert(brand_job_valid(s, 3 + 64));
    cr_assert_not(brand_job_valid(s, 3 + 65));
}

Test(brand, job_ids_and_kind)
{
    OK(brand_job_valid, "JOB01HZX");
    OK(brand_job_kind, "JOB");
    BAD(brand_job_valid, "JOB");
    BAD(brand_job_kind, "job1");
    BAD(brand_job_kind, "TEN1");
    OK(brand_job_kind, "JOB bad");
    BAD(brand_job_valid, "JOB bad");
    BAD(brand_job_valid, "JOB}x");
}

Test(brand, queue_names)
{
    OK(brand_queue_valid, "orders");
    OK(brand_queue_valid, "a.b-c_D9");
    BAD(brand_queue_valid, "");
    BAD(brand_queue_valid, "a{b");
    BAD(brand_queue_valid, "a}b");
    BAD(brand_queue_valid, "a:b");
    BAD(brand_queue_valid, "a b");
    BAD(brand_queue_valid, "a*");
    char s[66];
    memset(s, 'q', sizeof(s));
    cr_assert(brand_queue_valid(s, 64));
    cr_assert_not(brand_queue_valid(s, 65));
}
