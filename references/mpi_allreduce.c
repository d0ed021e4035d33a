/* The fidelity reference for bench-collective: the least code that times MPI_Allreduce
 * the way nccl-tests times a collective (src/common.cu, BenchTime).
 *
 * Same definition of a size as bench-collective and nccl-tests (bytes of float32 per
 * rank, out of place, MPI_SUM). For each size: `warmup` untimed calls, a barrier, then one
 * timer around `iters` back-to-back calls; each rank's time is the loop time / iters, and
 * the figure reported is the mean over ranks (nccl-tests' default `-a 1`), in
 * microseconds. Nothing happens between two timed calls: no per-iteration clock read,
 * no store.
 *
 * Build: mpicc -O2 -o mpi_allreduce references/mpi_allreduce.c
 * Run:   mpirun -np 2 ./mpi_allreduce MINBYTES MAXBYTES ITERS WARMUP
 * Output (rank 0): one line per size, powers of two from MINBYTES to MAXBYTES:
 *   "size_bytes time_us"
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

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
    for (size_t i = 0; i < maxcount; i++) send[i] = (float)(i % 5);

    for (long size = minb; size <= maxb; size *= 2) {
        int count = (int)(size / (long)sizeof(float));
        for (int i = 0; i < warmup; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double per_iter = (MPI_Wtime() - start) / iters, sum;
        MPI_Allreduce(&per_iter, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%ld %.4f\n", size, sum / nranks * 1e6);
            fflush(stdout);
        }
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
