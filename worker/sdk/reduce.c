/*
 * reduce.c — elementwise reduction kernels, one tight loop per (dtype, op), written so the
 * compiler vectorizes them (this file is built with -O3). `restrict`: dst and src never alias
 * (src is the ring's staging buffer). Integer sums wrap modulo 2^bits (computed unsigned, so
 * overflow is defined rather than undefined behaviour).
 */
#include <stdint.h>

#include "internal.h"

#define TY__KERNELS(T, U, SUF)                                                                     \
    static void reduce_sum_##SUF(T *restrict d, const T *restrict s, size_t n)                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = (T)((U)d[i] + (U)s[i]);                                                         \
    }                                                                                              \
    static void reduce_min_##SUF(T *restrict d, const T *restrict s, size_t n)                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = s[i] < d[i] ? s[i] : d[i];                                                      \
    }                                                                                              \
    static void reduce_max_##SUF(T *restrict d, const T *restrict s, size_t n)                     \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = s[i] > d[i] ? s[i] : d[i];                                                      \
    }                                                                                              \
    static void scale_div_##SUF(T *d, size_t n, T div)                                             \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = d[i] / div;                                                                     \
    }                                                                                              \
    static void reduce_##SUF(void *d, const void *s, size_t n, ty_op op)                           \
    {                                                                                              \
        switch (op) {                                                                              \
        case TY_SUM:                                                                               \
        case TY_AVG:                                                                               \
            reduce_sum_##SUF(d, s, n);                                                             \
            break;                                                                                 \
        case TY_MIN:                                                                               \
            reduce_min_##SUF(d, s, n);                                                             \
            break;                                                                                 \
        case TY_MAX:                                                                               \
            reduce_max_##SUF(d, s, n);                                                             \
            break;                                                                                 \
        }                                                                                          \
    }

TY__KERNELS(float, float, f32)
TY__KERNELS(double, double, f64)
TY__KERNELS(int32_t, uint32_t, i32)
TY__KERNELS(int64_t, uint64_t, i64)

void ty__reduce(void *dst, const void *src, size_t count, ty_dtype dt, ty_op op)
{
    switch (dt) {
    case TY_FLOAT32:
        reduce_f32(dst, src, count, op);
        break;
    case TY_FLOAT64:
        reduce_f64(dst, src, count, op);
        break;
    case TY_INT32:
        reduce_i32(dst, src, count, op);
        break;
    case TY_INT64:
        reduce_i64(dst, src, count, op);
        break;
    }
}

void ty__scale_div(void *buf, size_t count, ty_dtype dt, int divisor)
{
    switch (dt) {
    case TY_FLOAT32:
        scale_div_f32(buf, count, (float)divisor);
        break;
    case TY_FLOAT64:
        scale_div_f64(buf, count, (double)divisor);
        break;
    case TY_INT32:
        scale_div_i32(buf, count, (int32_t)divisor);
        break;
    case TY_INT64:
        scale_div_i64(buf, count, (int64_t)divisor);
        break;
    }
}
