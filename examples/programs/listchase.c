/* A pointer chase over a randomly linked list: every load depends on the one
 * before, so a page walk's latency is exposed in full (no overlap with other
 * loads), unlike GUPS's independent updates.
 * usage: listchase [MiB, default 64] [steps, default 8M] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node { struct node *next; uint64_t pad[7]; };  /* one 64-byte line per node */

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 64;
    long steps = argc > 2 ? atol(argv[2]) : 8000000;
    if (mib < 1 || mib > 65536 || steps < 1) {
        fprintf(stderr, "usage: listchase [MiB 1..65536] [steps >= 1]\n");
        return 2;
    }
    size_t n = ((size_t)mib << 20) / sizeof(struct node);
    struct node *a = malloc(n * sizeof *a);
    size_t *perm = malloc(n * sizeof *perm);
    if (!a || !perm) { perror("malloc"); return 1; }
    for (size_t i = 0; i < n; i++) perm[i] = i;
    uint64_t s = 88172645463325252ull;
    for (size_t i = n - 1; i > 0; i--) {  /* Fisher-Yates */
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        size_t j = s % (i + 1), x = perm[i];
        perm[i] = perm[j]; perm[j] = x;
    }
    for (size_t i = 0; i < n; i++) a[perm[i]].next = &a[perm[(i + 1) % n]];
    free(perm);
    struct node *p = &a[0];
    for (long i = 0; i < steps; i++) p = p->next;
    printf("%zu\n", (size_t)(p - a));
    free(a);
    return 0;
}
