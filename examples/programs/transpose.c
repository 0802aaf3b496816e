/* Out-of-place transpose of a square matrix of doubles, read row by row and
 * written column by column: every write of a column walk lands on another
 * 4 KiB page (a row is 32 KiB at the default size), so 4 KiB pages miss on
 * nearly every write while the reads stream. A strided pattern, neither
 * random nor dependent.
 * usage: transpose [n, default 4096 (two 128 MiB matrices)] [passes, default 3] */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 4096;
    int passes = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 16 || n > 65536 || passes < 1) {
        fprintf(stderr, "usage: transpose [n 16..65536] [passes >= 1]\n");
        return 2;
    }
    double *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b);
    if (!a || !b) { perror("malloc"); return 1; }
    for (long i = 0; i < n * n; i++) a[i] = (double)i;
    double sum = 0;
    for (int p = 0; p < passes; p++) {
        for (long i = 0; i < n; i++)
            for (long j = 0; j < n; j++) b[j * n + i] = a[i * n + j] + p;
        sum += b[(p * 7919) % (n * n)];
    }
    printf("%.0f\n", sum);
    free(a); free(b);
    return 0;
}
