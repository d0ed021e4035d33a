/* The fidelity reference for bench-collective: the least code that times MPI_Allreduce.
 *
 * Same definition of a size as bench-collective and nccl-tests (bytes of float32 per
 * rank, out of place, MPI_SUM). For each size: `warmup` untimed calls, then `iters` calls
 * each timed with MPI_Wtime; the time reported is the mean over iterations of the slowest
 * rank's time for that iteration (element-wise MAX across ranks), which is how
 * bench-collective defines time_us. The loop-total mean (nccl-tests' and OSU's way) is
 * printed beside it.
 *
 * Build: mpicc -O2 -o mpi_allreduce benches/mpi_allreduce.c
 * Run:   mpirun -np 2 ./mpi_allreduce MINBYTES MAXBYTES ITERS WARMUP
 * Output (rank 0): one line per size:
 *   "size_bytes mean_of_per_iter_max_us loop_mean_us median_of_per_iter_max_us".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 5) {
        if (rank == 0) fprintf(stderr, "usage: %s MINBYTES MAXBYTES ITERS WARMUP\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    long minb = atol(argv[1]), maxb = atol(argv[2]);
    int iters = atoi(argv[3]), warmup = atoi(argv[4]);
    size_t maxcount = (size_t)maxb / sizeof(float);
    float *send = malloc(maxcount * sizeof(float) + 1);
    float *recv = malloc(maxcount * sizeof(float) + 1);
    double *t = malloc(sizeof(double) * iters);
    double *tmax = malloc(sizeof(double) * iters);
    for (size_t i = 0; i < maxcount; i++) send[i] = (float)(i % 5);

    for (long size = minb; size <= maxb; size *= 2) {
        int count = (int)(size / (long)sizeof(float));
        for (int i = 0; i < warmup; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            double t0 = MPI_Wtime();
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[i] = MPI_Wtime() - t0;
        }
        double loop = (MPI_Wtime() - start) / iters, loop_max;
        MPI_Reduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&loop, &loop_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double sum = 0;
            for (int i = 0; i < iters; i++) sum += tmax[i];
            qsort(tmax, iters, sizeof(double), cmp_double);
            double median = iters % 2 ? tmax[iters / 2] : (tmax[iters / 2 - 1] + tmax[iters / 2]) / 2;
            printf("%ld %.4f %.4f %.4f\n", size, sum / iters * 1e6, loop_max * 1e6, median * 1e6);
            fflush(stdout);
        }
    }
    free(send); free(recv); free(t); free(tmax);
    MPI_Finalize();
    return 0;
}
