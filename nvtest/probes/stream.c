/*
 * nvtest STREAM-style host memory bandwidth kernel.
 *
 * Four kernels over double arrays a, b, c of N elements, in the order
 * and with the byte counting of McCalpin's STREAM benchmark:
 *
 *   copy   c = a           2 words per element (read a, write c)
 *   scale  b = s * c       2 words
 *   add    c = a + b       3 words
 *   triad  a = b + s * c   3 words
 *
 * Iteration 0 is a warm-up; iterations 1..reps are timed.  Rates are
 * MB/s = 10^6 bytes per second from the best (minimum) time.  After the
 * loop every array is compared with the value the same recurrence gives on
 * scalars (a=1, b=2, c=0 initially); the run validates when the average and
 * maximum relative absolute error of each array are <= 1e-13.
 *
 * Output: a text table in the layout of stream.c (the python wrapper
 * stream_probe.py and the controller parse it).
 *
 * Usage: stream -n ELEMENTS -r REPS [-s SCALAR] [-x]
 *   -x  corrupt one element of a[] after the timed loop (tests the checker)
 *
 * Build: cc -O3 -fopenmp stream.c -o stream   (or without -fopenmp)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define EPSILON 1.0e-13
#define NKERNELS 4

static double now_s(void) {
#ifdef _OPENMP
    return omp_get_wtime();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
#endif
}

static double *alloc_array(long n) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, (size_t)n * sizeof(double)) != 0) return NULL;
    return (double *)p;
}

/* Average and maximum of |x[j] - expect| / |expect| over the array. */
static void rel_errors(const double *x, long n, double expect, double *avg, double *max) {
    double sum = 0.0, mx = 0.0;
#pragma omp parallel for reduction(+ : sum) reduction(max : mx)
    for (long j = 0; j < n; j++) {
        double e = fabs(x[j] - expect);
        sum += e;
        if (e > mx) mx = e;
    }
    *avg = sum / (double)n / fabs(expect);
    *max = mx / fabs(expect);
}

int main(int argc, char **argv) {
    long n = 0, reps = 10;
    double scalar = 3.0;
    int inject = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atol(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atol(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) scalar = atof(argv[++i]);
        else if (!strcmp(argv[i], "-x")) inject = 1;
        else {
            fprintf(stderr, "usage: %s -n ELEMENTS -r REPS [-s SCALAR] [-x]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || reps < 1) {
        fprintf(stderr, "need -n >= 1 and -r >= 1\n");
        return 2;
    }
    double *a = alloc_array(n), *b = alloc_array(n), *c = alloc_array(n);
    if (!a || !b || !c) {
        fprintf(stderr, "cannot allocate 3 arrays of %ld doubles\n", n);
        return 3;
    }
    int threads = 1;
#ifdef _OPENMP
#pragma omp parallel
#pragma omp master
    threads = omp_get_num_threads();
#endif
    /* First touch by the threads that will use the pages (NUMA placement). */
#pragma omp parallel for
    for (long j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }

    const char *names[NKERNELS] = {"Copy:", "Scale:", "Add:", "Triad:"};
    const double words[NKERNELS] = {2.0, 2.0, 3.0, 3.0};
    double mint[NKERNELS], maxt[NKERNELS], sumt[NKERNELS];
    for (int k = 0; k < NKERNELS; k++) {
        mint[k] = 1.0e30;
        maxt[k] = 0.0;
        sumt[k] = 0.0;
    }
    const double s = scalar;
    for (long it = 0; it <= reps; it++) {
        double t[NKERNELS];
        t[0] = now_s();
#pragma omp parallel for
        for (long j = 0; j < n; j++) c[j] = a[j];
        t[0] = now_s() - t[0];
        t[1] = now_s();
#pragma omp parallel for
        for (long j = 0; j < n; j++) b[j] = s * c[j];
        t[1] = now_s() - t[1];
        t[2] = now_s();
#pragma omp parallel for
        for (long j = 0; j < n; j++) c[j] = a[j] + b[j];
        t[2] = now_s() - t[2];
        t[3] = now_s();
#pragma omp parallel for
        for (long j = 0; j < n; j++) a[j] = b[j] + s * c[j];
        t[3] = now_s() - t[3];
        if (it == 0) continue; /* warm-up */
        for (int k = 0; k < NKERNELS; k++) {
            sumt[k] += t[k];
            if (t[k] < mint[k]) mint[k] = t[k];
            if (t[k] > maxt[k]) maxt[k] = t[k];
        }
    }
    if (inject) a[n / 2] = -a[n / 2];

    /* Expected values: the same recurrence on scalars, warm-up included. */
    double aj = 1.0, bj = 2.0, cj = 0.0;
    for (long it = 0; it <= reps; it++) {
        cj = aj;
        bj = s * cj;
        cj = aj + bj;
        aj = bj + s * cj;
    }

    printf("-------------------------------------------------------------\n");
    printf("nvtest STREAM-style kernel, %s\n",
#ifdef _OPENMP
           "OpenMP"
#else
           "serial"
#endif
    );
    printf("-------------------------------------------------------------\n");
    printf("Array size = %ld (elements), Offset = 0 (elements)\n", n);
    printf("Memory per array = %.1f MiB (= %.1f GiB).\n", n * 8.0 / 1048576.0,
           n * 8.0 / 1073741824.0);
    printf("Total memory required = %.1f MiB (= %.1f GiB).\n", 3.0 * n * 8.0 / 1048576.0,
           3.0 * n * 8.0 / 1073741824.0);
    printf("Each kernel will be executed %ld times.\n", reps + 1);
    printf(" The *best* time for each kernel (excluding the first iteration)\n");
    printf(" will be used to compute the reported bandwidth.\n");
    printf("Number of Threads counted = %d\n", threads);
    printf("-------------------------------------------------------------\n");
    printf("Function    Best Rate MB/s  Avg time     Min time     Max time\n");
    for (int k = 0; k < NKERNELS; k++) {
        double bytes = words[k] * sizeof(double) * (double)n;
        printf("%-12s%14.1f  %11.6f  %11.6f  %11.6f\n", names[k], 1.0e-6 * bytes / mint[k],
               sumt[k] / (double)reps, mint[k], maxt[k]);
    }
    printf("-------------------------------------------------------------\n");

    const char *arr[3] = {"a", "b", "c"};
    const double *ptr[3] = {a, b, c};
    const double expect[3] = {aj, bj, cj};
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        double avg, mx;
        rel_errors(ptr[i], n, expect[i], &avg, &mx);
        printf("Array %s: expected %.12e, AvgRelAbsErr %.6e, MaxRelAbsErr %.6e\n", arr[i],
               expect[i], avg, mx);
        if (!(avg <= EPSILON && mx <= EPSILON)) {
            ok = 0;
            printf("Failed Validation on array %s[], RelAbsErr > epsilon (%e)\n", arr[i], EPSILON);
        }
    }
    if (ok) printf("Solution Validates: avg and max error less than %e on all three arrays\n", EPSILON);
    printf("-------------------------------------------------------------\n");
    free(a);
    free(b);
    free(c);
    return 0;
}
