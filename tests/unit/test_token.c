/* Unit tests for server/token.c (token minting) and server/identity.c (role names). */
#include "ty_test.h"

#include <ctype.h>
#include <string.h>

#include "identity.h"
#include "token.h"
#include "util.h"

static void token_format_writes_prefix_then_lowercase_hex(void **state)
{
    (void)state;
    const unsigned char raw[] = {0x00, 0x0f, 0xa0, 0xff};
    char out[16];
    assert_int_equal(srv_token_format("ty_", raw, sizeof(raw), out, sizeof(out)), 11);
    assert_string_equal(out, "ty_000fa0ff");
}

static void token_format_refuses_a_buffer_one_byte_short(void **state)
{
    (void)state;
    const unsigned char raw[] = {0x12, 0x34};
    char out[8] = "garbage";
    /* "tyc_1234" needs 9 bytes with its NUL. */
    assert_int_equal(srv_token_format("tyc_", raw, sizeof(raw), out, 8), -1);
    assert_string_equal(out, "");
    char fits[9];
    assert_int_equal(srv_token_format("tyc_", raw, sizeof(raw), fits, sizeof(fits)), 8);
    assert_string_equal(fits, "tyc_1234");
}

static void token_mint_makes_prefix_and_40_hex_digits(void **state)
{
    (void)state;
    char token[SRV_TOKEN_MAX];
    assert_int_equal(srv_token_mint("tyc_", token, sizeof(token), NULL), 0);
    assert_int_equal(strlen(token), 4 + 2 * SRV_TOKEN_RANDOM_BYTES);
    assert_memory_equal(token, "tyc_", 4);
    for (const char *p = token + 4; *p; p++)
        assert_true(isxdigit((unsigned char)*p) && !isupper((unsigned char)*p));
}

static void token_mint_hash_is_the_sha256_of_the_token(void **state)
{
    (void)state;
    char token[SRV_TOKEN_MAX], hash[65], want[65];
    assert_int_equal(srv_token_mint("ty_", token, sizeof(token), hash), 0);
    util_sha256_hex(token, strlen(token), want);
    assert_string_equal(hash, want);
}

static void token_mint_gives_a_new_token_each_time(void **state)
{
    (void)state;
    char a[SRV_TOKEN_MAX], b[SRV_TOKEN_MAX];
    assert_int_equal(srv_token_mint("ty_", a, sizeof(a), NULL), 0);
    assert_int_equal(srv_token_mint("ty_", b, sizeof(b), NULL), 0);
    assert_string_not_equal(a, b);
}

static void token_mint_refuses_a_buffer_too_small(void **state)
{
    (void)state;
    char token[43]; /* "ty_" + 40 + NUL needs 44 */
    assert_int_equal(srv_token_mint("ty_", token, sizeof(token), NULL), -1);
}

static void role_names_round_trip(void **state)
{
    (void)state;
    for (enum srv_role r = SRV_ROLE_VIEWER; r <= SRV_ROLE_ADMIN; r++) {
        enum srv_role back = SRV_ROLE_NONE;
        assert_int_equal(srv_role_from_string(srv_role_name(r), &back), 0);
        assert_int_equal(back, r);
    }
    assert_string_equal(srv_role_name(SRV_ROLE_NONE), "none");
}

static void role_from_string_refuses_none_case_and_null(void **state)
{
    (void)state;
    enum srv_role r = SRV_ROLE_USER;
    assert_int_equal(srv_role_from_string("none", &r), -1);
    assert_int_equal(srv_role_from_string("Admin", &r), -1);
    assert_int_equal(srv_role_from_string(NULL, &r), -1);
    assert_int_equal(r, SRV_ROLE_USER);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(token_format_writes_prefix_then_lowercase_hex),
    cmocka_unit_test(token_format_refuses_a_buffer_one_byte_short),
    cmocka_unit_test(token_mint_makes_prefix_and_40_hex_digits),
    cmocka_unit_test(token_mint_hash_is_the_sha256_of_the_token),
    cmocka_unit_test(token_mint_gives_a_new_token_each_time),
    cmocka_unit_test(token_mint_refuses_a_buffer_too_small),
    cmocka_unit_test(role_names_round_trip),
    cmocka_unit_test(role_from_string_refuses_none_case_and_null),
};

TY_TEST_MAIN(tests)
