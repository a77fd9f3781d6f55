/*
 * allreduce_mpi — MPI_Allreduce (float, sum, in place) benchmark with the same output as
 * allreduce_bench. Built by bench/allreduce.sh with mpicc (not part of the CMake build).
 *
 *   mpirun -np N allreduce_mpi [--min BYTES] [--max BYTES] [--factor F] [--seconds S]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    else if (*end == 'G' || *end == 'g')
        v <<= 30;
    return (size_t)v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int p, r;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    size_t lo = 4096, hi = 256u << 20;
    double seconds = 0.5;
    size_t factor = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--min") == 0)
            lo = parse_size(argv[i + 1]);
        else if (strcmp(argv[i], "--max") == 0)
            hi = parse_size(argv[i + 1]);
        else if (strcmp(argv[i], "--factor") == 0)
            factor = parse_size(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = strtod(argv[i + 1], NULL);
    }
    float *buf = malloc(hi);
    for (size_t i = 0; i < hi / sizeof(float); i++)
        buf[i] = (float)(i % 7);
    if (r == 0)
        printf(
            "# ranks %d  float32 sum (Open MPI)\n# bytes iters sec_per_op algbw_GBps busbw_GBps\n",
            p);
    for (size_t bytes = lo; bytes <= hi; bytes *= (factor < 2 ? 2 : factor)) {
        int n = (int)(bytes / sizeof(float));
        double t = MPI_Wtime();
        for (int w = 0; w < 2; w++)
            MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double per = (MPI_Wtime() - t) / 2;
        int iters = per > 0 ? (int)(seconds / per) : 1000;
        iters = iters < 3 ? 3 : iters > 2000 ? 2000 : iters;
        MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double el = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &el, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double op = el / iters, alg = (double)bytes / op / 1e9;
        if (r == 0) {
            printf("%zu %d %.6e %.3f %.3f\n", bytes, iters, op, alg, alg * 2.0 * (p - 1) / p);
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
