/* The fidelity reference for bench-collective's alltoall and ep_dispatch: the least code
 * that times MPI_Alltoall and MPI_Alltoallv the way nccl-tests times a collective
 * (src/common.cu): `warmup` untimed calls, a barrier, one timer around `iters`
 * back-to-back calls; each rank's loop time / iters, mean over ranks, microseconds.
 *
 * Build: mpicc -O2 -o mpi_alltoallv references/mpi_alltoallv.c
 * Run:   mpirun -np N ./mpi_alltoallv alltoall MINBYTES MAXBYTES ITERS WARMUP
 *          float32, size = the whole buffer per rank (nccl-tests' size column), powers of
 *          two; prints "size_bytes time_us" per size (rank 0).
 *        mpirun -np N ./mpi_alltoallv alltoallv ROW_BYTES ITERS WARMUP COUNTS_FILE
 *          COUNTS_FILE: N lines of N integers, line s = rows rank s sends to each rank
 *          (a row is ROW_BYTES bytes, one contiguous datatype); prints "rows time_us".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double mean_us(double per_iter, int nranks) {
    double sum;
    MPI_Allreduce(&per_iter, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / nranks * 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc == 6 && strcmp(argv[1], "alltoall") == 0) {
        long minb = atol(argv[2]), maxb = atol(argv[3]);
        int iters = atoi(argv[4]), warmup = atoi(argv[5]);
        char *send = malloc(maxb + 1), *recv = malloc(maxb + 1);
        memset(send, 1, maxb + 1);
        memset(recv, 2, maxb + 1);
        for (long size = minb; size <= maxb; size *= 2) {
            int count = (int)(size / 4 / n);
            if (count == 0) continue;
            for (int i = 0; i < warmup; i++)
                MPI_Alltoall(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++)
                MPI_Alltoall(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
            double us = mean_us((MPI_Wtime() - t0) / iters, n);
            if (rank == 0) printf("%ld %.4f\n", (long)count * 4 * n, us), fflush(stdout);
        }
        free(send);
        free(recv);
    } else if (argc == 6 && strcmp(argv[1], "alltoallv") == 0) {
        int row = atoi(argv[2]), iters = atoi(argv[3]), warmup = atoi(argv[4]);
        FILE *f = fopen(argv[5], "r");
        if (!f) {
            if (rank == 0) fprintf(stderr, "cannot open %s\n", argv[5]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        int *m = malloc(sizeof(int) * n * n);
        for (int i = 0; i < n * n; i++)
            if (fscanf(f, "%d", &m[i]) != 1) MPI_Abort(MPI_COMM_WORLD, 2);
        fclose(f);
        int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n);
        int *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
        long st = 0, rt = 0;
        for (int p = 0; p < n; p++) {
            sc[p] = m[rank * n + p], sd[p] = (int)st, st += sc[p];
            rc[p] = m[p * n + rank], rd[p] = (int)rt, rt += rc[p];
        }
        MPI_Datatype t;
        MPI_Type_contiguous(row, MPI_BYTE, &t);
        MPI_Type_commit(&t);
        char *send = malloc(st * row + 1), *recv = malloc(rt * row + 1);
        memset(send, 1, st * row + 1);
        memset(recv, 2, rt * row + 1);
        for (int i = 0; i < warmup; i++)
            MPI_Alltoallv(send, sc, sd, t, recv, rc, rd, t, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Alltoallv(send, sc, sd, t, recv, rc, rd, t, MPI_COMM_WORLD);
        double us = mean_us((MPI_Wtime() - t0) / iters, n);
        if (rank == 0) printf("%ld %.4f\n", st, us);
        MPI_Type_free(&t);
    } else {
        if (rank == 0)
            fprintf(stderr, "usage: %s alltoall MIN MAX ITERS WARMUP | alltoallv ROW_BYTES ITERS WARMUP COUNTS_FILE\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    MPI_Finalize();
    return 0;
}
