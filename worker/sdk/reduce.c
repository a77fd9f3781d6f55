/*
 * reduce.c — elementwise reduction kernels, written so the compiler vectorizes them (this file is
 * built with -O3). Integer sums wrap modulo 2^bits (computed unsigned, so overflow is defined
 * rather than undefined behaviour).
 *
 * One kernel folds up to four sources in a single pass over memory, and can store its result to
 * two places in the same pass: the shared-memory allreduce reduces a rank's share from every
 * rank at once and writes it both into the caller's buffer and into the segment, instead of
 * one read-modify-write pass per peer plus a copy. Each (dtype, op) gets
 *   acc1..acc3:  d = op(d, a[, b[, c]])      (in place: d is also the first source)
 *   out2..out4:  d = op(a, b[, c[, e]])      (d overlaps no source)
 * each also storing to o when o is not NULL. All pointers are `restrict`: d is read and written
 * only through d, and no two buffers overlap (the ring's staging buffer, the segment's slots and
 * the caller's buffer are distinct memory).
 */
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* One pass: the loop twice, with and without the second store, so both vectorize. */
#define TY__PASS(T, EXPR)                                                                          \
    do {                                                                                           \
        if (o) {                                                                                   \
            for (size_t i = 0; i < n; i++) {                                                       \
                T v_ = (EXPR);                                                                     \
                d[i] = v_;                                                                         \
                o[i] = v_;                                                                         \
            }                                                                                      \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                d[i] = (EXPR);                                                                     \
        }                                                                                          \
    } while (0)

/* The kernels of one (type, op): F(x, y) combines two elements; ISA names the instruction set
 * they are compiled for, ATTR says how. */
#define TY__FOLD(T, NAME, F, ISA, ATTR)                                                            \
    ATTR static void acc1_##NAME##ISA(T *restrict d, T *restrict o, const T *restrict a, size_t n) \
    {                                                                                              \
        TY__PASS(T, F(d[i], a[i]));                                                                \
    }                                                                                              \
    ATTR static void acc2_##NAME##ISA(T *restrict d, T *restrict o, const T *restrict a,           \
                                      const T *restrict b, size_t n)                               \
    {                                                                                              \
        TY__PASS(T, F(F(d[i], a[i]), b[i]));                                                       \
    }                                                                                              \
    ATTR static void acc3_##NAME##ISA(T *restrict d, T *restrict o, const T *restrict a,           \
                                      const T *restrict b, const T *restrict c, size_t n)          \
    {                                                                                              \
        TY__PASS(T, F(F(F(d[i], a[i]), b[i]), c[i]));                                              \
    }                                                                                              \
    ATTR static void out2_##NAME##ISA(T *restrict d, T *restrict o, const T *restrict a,           \
                                      const T *restrict b, size_t n)                               \
    {                                                                                              \
        TY__PASS(T, F(a[i], b[i]));                                                                \
    }                                                                                              \
    ATTR static void out3_##NAME##ISA(T *restrict d, T *restrict o, const T *restrict a,           \
                                      const T *restrict b, const T *restrict c, size_t n)          \
    {                                                                                              \
        TY__PASS(T, F(F(a[i], b[i]), c[i]));                                                       \
    }                                                                                              \
    ATTR static void out4_##NAME##ISA(T *restrict d, T *restrict o, const T *restrict a,           \
                                      const T *restrict b, const T *restrict c,                    \
                                      const T *restrict e, size_t n)                               \
    {                                                                                              \
        TY__PASS(T, F(F(F(a[i], b[i]), c[i]), e[i]));                                              \
    }                                                                                              \
    /* ty__reduce_n for this (type, op); see internal.h. */                                        \
    ATTR static void fold_##NAME##ISA(void *dv, void *ov, const void *const *sv, int ns, size_t n) \
    {                                                                                              \
        T *d = dv, *o = ov;                                                                        \
        const T *const *s = (const T *const *)sv;                                                  \
        int k = ns < 4 ? ns : 4;                                                                   \
        T *fo = k == ns ? o : NULL; /* the second store goes with the last pass */                 \
        if (s[0] == d)                                                                             \
            k = 1;                                                                                 \
        else if (k == 1)                                                                           \
            memcpy(d, s[0], n * sizeof(T));                                                        \
        else if (k == 2)                                                                           \
            out2_##NAME##ISA(d, fo, s[0], s[1], n);                                                \
        else if (k == 3)                                                                           \
            out3_##NAME##ISA(d, fo, s[0], s[1], s[2], n);                                          \
        else                                                                                       \
            out4_##NAME##ISA(d, fo, s[0], s[1], s[2], s[3], n);                                    \
        if (k == ns && k == 1 && o)                                                                \
            memcpy(o, d, n * sizeof(T));                                                           \
        while (k < ns) {                                                                           \
            int m = ns - k < 3 ? ns - k : 3;                                                       \
            T *lo = k + m == ns ? o : NULL;                                                        \
            if (m == 1)                                                                            \
                acc1_##NAME##ISA(d, lo, s[k], n);                                                  \
            else if (m == 2)                                                                       \
                acc2_##NAME##ISA(d, lo, s[k], s[k + 1], n);                                        \
            else                                                                                   \
                acc3_##NAME##ISA(d, lo, s[k], s[k + 1], s[k + 2], n);                              \
            k += m;                                                                                \
        }                                                                                          \
    }

#define TY__MIN(x, y) ((y) < (x) ? (y) : (x))
#define TY__MAX(x, y) ((y) > (x) ? (y) : (x))
#define TY__ADD(x, y) ((x) + (y))
#define TY__ADD_U32(x, y) ((int32_t)((uint32_t)(x) + (uint32_t)(y)))
#define TY__ADD_U64(x, y) ((int64_t)((uint64_t)(x) + (uint64_t)(y)))

typedef void reduce_fold_fn(void *d, void *o, const void *const *s, int ns, size_t n);

/* The three ops of one type (ADD: its wrapping sum) and their row of the table (TY_AVG reduces
 * as TY_SUM). */
#define TY__FOLD_TYPE(T, SUF, ADD, ISA, ATTR)                                                      \
    TY__FOLD(T, sum_##SUF, ADD, ISA, ATTR)                                                         \
    TY__FOLD(T, min_##SUF, TY__MIN, ISA, ATTR)                                                     \
    TY__FOLD(T, max_##SUF, TY__MAX, ISA, ATTR)
#define TY__FOLD_ROW(SUF, ISA)                                                                     \
    {                                                                                              \
        fold_sum_##SUF##ISA, fold_min_##SUF##ISA, fold_max_##SUF##ISA, fold_sum_##SUF##ISA         \
    }

/* Every kernel for one instruction set, and their table [dtype][op]. */
#define TY__FOLD_ALL(ISA, ATTR)                                                                    \
    TY__FOLD_TYPE(float, f32, TY__ADD, ISA, ATTR)                                                  \
    TY__FOLD_TYPE(double, f64, TY__ADD, ISA, ATTR)                                                 \
    TY__FOLD_TYPE(int32_t, i32, TY__ADD_U32, ISA, ATTR)                                            \
    TY__FOLD_TYPE(int64_t, i64, TY__ADD_U64, ISA, ATTR)                                            \
    static reduce_fold_fn *const reduce_folds##ISA[4][4] = {                                       \
        [TY_FLOAT32] = TY__FOLD_ROW(f32, ISA),                                                     \
        [TY_FLOAT64] = TY__FOLD_ROW(f64, ISA),                                                     \
        [TY_INT32] = TY__FOLD_ROW(i32, ISA),                                                       \
        [TY_INT64] = TY__FOLD_ROW(i64, ISA),                                                       \
    };

/* The baseline of the target (SSE2 on x86-64). */
TY__FOLD_ALL(_base, )

/* On x86-64, AVX2 as well, chosen at run time: in cache the AVX2 loops ran ~3x faster than the
 * SSE2 ones on the benchmark host (docs/bench-allreduce.md), and a chunk of the shared-memory
 * allreduce is sized to stay in cache. No ifunc (musl has none), no -mavx2 on the file (the
 * library must load on any x86-64). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TY__HAVE_AVX2 1
TY__FOLD_ALL(_avx2, __attribute__((target("avx2"))))
#endif

static reduce_fold_fn *reduce_fold(ty_dtype dt, ty_op op)
{
#ifdef TY__HAVE_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        return reduce_folds_avx2[dt][op];
#endif
    return reduce_folds_base[dt][op];
}

void ty__reduce_n(void *dst, void *dst2, const void *const *src, int nsrc, size_t count,
                  ty_dtype dt, ty_op op)
{
    reduce_fold(dt, op)(dst, dst2, src, nsrc, count);
}

void ty__reduce(void *dst, const void *src, size_t count, ty_dtype dt, ty_op op)
{
    const void *s[2] = {dst, src};
    ty__reduce_n(dst, NULL, s, 2, count, dt, op);
}

#define TY__SCALE(T, SUF)                                                                          \
    static void scale_div_##SUF(T *d, size_t n, T div)                                             \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = d[i] / div;                                                                     \
    }

TY__SCALE(float, f32)
TY__SCALE(double, f64)
TY__SCALE(int32_t, i32)
TY__SCALE(int64_t, i64)

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
