/* Open-addressing hash table probed with skewed keys: a few hot buckets
 * regions, a long cold tail. A TLB-bound pattern whose hot set is a small
 * part of the footprint (what a budgeted huge-page policy should find).
 * usage: hashprobe [log2 slots, default 23 = 64 MiB of 8-byte slots] [lookups, default 20M] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return *s = x;
}

int main(int argc, char **argv) {
    int bits = argc > 1 ? atoi(argv[1]) : 23;
    long lookups = argc > 2 ? atol(argv[2]) : 20000000;
    if (bits < 10 || bits > 30 || lookups < 1) {
        fprintf(stderr, "usage: hashprobe [log2 slots 10..30] [lookups >= 1]\n");
        return 2;
    }
    size_t slots = (size_t)1 << bits, mask = slots - 1;
    uint64_t *t = calloc(slots, sizeof *t);
    if (!t) { perror("calloc"); return 1; }
    uint64_t s = 0x9e3779b97f4a7c15ull;
    /* Fill half the table: key k lands at hash(k), probing linearly. */
    for (size_t i = 0; i < slots / 2; i++) {
        uint64_t k = next(&s) | 1, h = (k * 0xff51afd7ed558ccdull) >> (64 - bits);
        while (t[h]) h = (h + 1) & mask;
        t[h] = k;
    }
    /* Lookups: with probability 7/8 a key from a hot 1/64 of the key space
     * (its slots scattered by the hash, so hot pages are a hash image). */
    uint64_t found = 0, q = 12345;
    for (long i = 0; i < lookups; i++) {
        uint64_t r = next(&q);
        uint64_t h = (r & 7) ? (r >> 8) & (mask >> 6) : (r >> 8) & mask;
        h = (h * 0x9e3779b97f4a7c15ull) >> (64 - bits);
        while (t[h] && !(t[h] & 2)) h = (h + 1) & mask;
        found += t[h] != 0;
    }
    printf("%llu\n", (unsigned long long)found);
    free(t);
    return 0;
}
