/* Shared main for cmocka unit tests: `prog [TEST_NAME]` runs one test (as CTest does) or all. */
#ifndef TY_TEST_H
#define TY_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define TY_TEST_MAIN(tests)                                                                        \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        if (argc > 1)                                                                              \
            cmocka_set_test_filter(argv[1]);                                                       \
        return cmocka_run_group_tests(tests, NULL, NULL);                                          \
    }

#endif
