/*
 * hugescope's tracing runtime for clang's sanitizer-coverage load/store hooks.
 *
 * A program compiled with
 *   -fsanitize-coverage=inline-8bit-counters,trace-loads,trace-stores
 * calls __sanitizer_cov_loadN / __sanitizer_cov_storeN before every memory
 * access; linked with this file, each call appends one 8-byte record to a
 * per-thread buffer, and full buffers are written to a file in large blocks.
 * `hugescope cc` builds and links it; `hugescope trace -- ./prog` sets the
 * environment below and converts the result into a .hst trace.
 *
 * Environment (without HUGESCOPE_TRACE_OUT the hooks do nothing, so an
 * instrumented binary also runs untraced):
 *   HUGESCOPE_TRACE_OUT     record file to write
 *   HUGESCOPE_TRACE_META    metadata file (maps snapshots, counts)
 *   HUGESCOPE_TRACE_SKIP    accesses to skip before recording (default 0)
 *   HUGESCOPE_TRACE_RECORD  accesses to record after that (default: all)
 *   HUGESCOPE_TRACE_RESERVE bytes of the output's file system left free: when a
 *                           block would go below it, recording stops and the
 *                           metadata says "# truncated disk" (default 1 GiB)
 *   HUGESCOPE_SITES_OUT     an existing file to append allocation-site lines to
 *                           (without tracing: `hugescope run` resolves a plan
 *                           written by allocation site through it)
 *   HUGESCOPE_SITE_MIN      smallest allocation whose site is recorded
 *                           (bytes, default 65536)
 *
 * Allocation sites (issue #38, as valgrind's DHAT records them): malloc,
 * calloc, realloc, posix_memalign, aligned_alloc, memalign and anonymous mmap
 * of at least HUGESCOPE_SITE_MIN bytes each add a line
 *   # alloc CALL SIZE START PC1 PC2 ...      (hex; PCs are return addresses)
 * to the metadata (or HUGESCOPE_SITES_OUT). The converter names the
 * program's regions by these sites; the PCs are symbolized there, from the
 * maps snapshots, not here (no symbol lookups inside an allocation).
 *
 * Record: bits 0-47 address, 48-55 thread number (mod 256), 56-58 log2 of the
 * access size, 63 store. Format details: crates/hugescope-core/src/trace/import/raw.rs.
 *
 * This file itself is compiled WITHOUT instrumentation, so the runtime never
 * traces its own buffers; their addresses are written to the metadata file
 * so they are left out of the program's regions too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 1 Mi records (8 MiB) per thread: one write() per million accesses keeps the
 * system-call cost negligible next to the hooks themselves. */
#define BUF_RECORDS (1u << 20)
#define MAX_THREADS 4096
/* Where record buffers are mapped (see new_buffer): 48 TiB, above where heap
 * and PIE binaries sit and below the mmap area under the stack with ASLR off. */
#define BUF_AREA 0x300000000000ull
#define BUF_ALIGN (2ull << 20)
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

struct tbuf {
    uint64_t *rec;
    uint32_t n;
    uint32_t tid;
};

static int out_fd = -1, meta_fd = -1;
static volatile int active;      /* tracing is on (set once at start-up) */
static uint64_t skip_n, record_n; /* record_n == 0: no limit */
static int windowed;
static uint64_t seen;             /* accesses seen, skipped ones included (windowed runs) */
static uint64_t threads;
/* A program left running (an endless loop, a server) must not fill the disk:
 * blocks stop being written once free space would drop below `reserve`. */
static uint64_t reserve = 1ull << 30;
static int stopped_full;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t key;
static struct tbuf *all[MAX_THREADS];
static unsigned nall;
static unsigned long long nmapped; /* buffers mapped so far: the next one's slot in BUF_AREA */
/* Buffers of exited threads, reused by new ones: a program that starts
 * thousands of short threads must not keep 8 MiB per dead thread. */
static struct tbuf *spare[MAX_THREADS];
static unsigned nspare;
static __thread struct tbuf *mine;

/* The runtime's own mappings go straight to the system call: `mmap` below is
 * the program's, and records the sites of anonymous mappings. */
static void *raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static void write_all(int fd, const void *p, size_t len) {
    const char *c = p;
    while (len > 0) {
        ssize_t w = write(fd, c, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return; /* a full disk: the converter reports the short file */
        }
        c += w;
        len -= (size_t)w;
    }
}

/* One metadata line from a format taking up to two numbers (snprintf ignores
 * arguments the format does not use). */
static void meta_printf(const char *fmt, unsigned long long a, unsigned long long b) {
    char line[128];
    int n = snprintf(line, sizeof line, fmt, a, b);
    if (n > 0)
        write_all(meta_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* Append a snapshot of /proc/self/maps to the metadata file. Called at every
 * block flush as well as at exit, so mappings freed before exit keep a name. */
static void snapshot_maps_to(int out) {
    if (out < 0)
        return;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[8192];
    write_all(out, "# maps\n", 7);
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            write_all(out, buf, (size_t)n);
    close(fd);
}

static void snapshot_maps(void) {
    snapshot_maps_to(meta_fd);
}

/* `# exe PATH` (the executable, whose frames make a site's key). */
static void note_exe(int out) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        write_all(out, "# exe ", 6);
        write_all(out, exe, (size_t)n);
        write_all(out, "\n", 1);
    }
}

/* Caller holds `lock`. */
static void flush_locked(struct tbuf *b, int maps) {
    if (b->n) {
        size_t len = (size_t)b->n * sizeof b->rec[0];
        struct statvfs fs;
        if (!stopped_full && fstatvfs(out_fd, &fs) == 0 &&
            (uint64_t)fs.f_bavail * fs.f_frsize < reserve + len) {
            stopped_full = 1;
            meta_printf("# truncated disk %llu\n", reserve, 0);
        }
        if (!stopped_full)
            write_all(out_fd, b->rec, len);
        b->n = 0;
        if (maps)
            snapshot_maps();
    }
}

static struct tbuf *new_buffer(void) {
    pthread_mutex_lock(&lock);
    if (nspare) {
        struct tbuf *b = spare[--nspare];
        b->tid = (uint32_t)threads++;
        meta_printf("# threads %llu\n", threads, 0);
        pthread_mutex_unlock(&lock);
        pthread_setspecific(key, b);
        return b;
    }
    unsigned long long slot = nmapped++;
    pthread_mutex_unlock(&lock);
    /* Buffers go to a fixed area far below the top-down mmap area: mapped
     * there (the kernel's choice), an 8 MiB buffer made before the program's
     * first large malloc would move that allocation down by 8 MiB, and a plan
     * made from the trace would name addresses the untraced run does not use
     * (the trace -> plan -> native run path needs them equal). */
    size_t len = BUF_RECORDS * sizeof(uint64_t) + 4096;
    void *hint = (void *)(uintptr_t)(BUF_AREA + slot * ((len + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN));
    void *m = raw_mmap(hint, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == MAP_FAILED || m != hint) {
        /* Taken (or an old kernel that treats the flag as a hint): anywhere. */
        if (m != MAP_FAILED)
            munmap(m, len);
        m = raw_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (m == MAP_FAILED)
        return NULL;
    struct tbuf *b = (struct tbuf *)((char *)m + BUF_RECORDS * sizeof(uint64_t));
    b->rec = m;
    b->n = 0;
    pthread_mutex_lock(&lock);
    b->tid = (uint32_t)threads++;
    if (nall < MAX_THREADS)
        all[nall++] = b;
    /* The thread count so far, also here: a run killed before exit still
     * tells the converter how many cpu ids its records use. */
    meta_printf("# threads %llu\n", threads, 0);
    meta_printf("# buffer %llx %llx\n", (unsigned long long)(uintptr_t)m,
                (unsigned long long)(uintptr_t)m + BUF_RECORDS * sizeof(uint64_t) + 4096);
    pthread_mutex_unlock(&lock);
    pthread_setspecific(key, b);
    return b;
}

/* A thread's records are written when it exits; its buffer stays listed (and
 * mapped) so a late flush at exit finds it empty rather than unmapped, and
 * goes to the spare list for the next new thread. */
static void thread_done(void *p) {
    pthread_mutex_lock(&lock);
    flush_locked(p, 0);
    if (nspare < MAX_THREADS)
        spare[nspare++] = p;
    pthread_mutex_unlock(&lock);
}

static void finish(void) {
    if (!active)
        return;
    active = 0;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < nall; i++)
        flush_locked(all[i], 0);
    snapshot_maps();
    meta_printf("# threads %llu\n", threads, 0);
    if (windowed)
        meta_printf("# seen %llu\n", seen, 0);
    pthread_mutex_unlock(&lock);
}

static void on_fatal(int sig) {
    /* Not async-signal-safe in general (a lock may be held), but the program
     * is dying anyway: try to keep what was traced, then die as it would have. */
    finish();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* In a forked child: trace nothing and drop the parent's buffered records,
 * which the parent writes itself (the child would write them a second time). */
static int sites_fd;
static void in_child(void) {
    active = 0;
    sites_fd = -1;
    for (unsigned i = 0; i < nall; i++)
        all[i]->n = 0;
}

static uint64_t env_u64(const char *name) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : 0;
}


/* ---- Allocation sites ------------------------------------------------- */

/* Frames kept per site: the allocator wrapper's caller and its callers, as
 * far as the converter needs to tell one call path from another. */
#define SITE_FRAMES 8
static size_t site_min = 64 << 10;
static int sites_fd = -1;
/* Set while this thread records a site: finding the stack's bounds may
 * allocate, and those allocations must not recurse. */
static __thread int in_site;

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static void sites_start(int fd) {
    sites_fd = fd;
}

/* Top of this thread's stack (exclusive), found once per thread: the frame
 * walk below never reads above it. 0 = unknown (then only the wrapper's
 * caller is recorded). */
static __thread uintptr_t stack_top;

static uintptr_t this_stack_top(void) {
    if (!stack_top) {
        pthread_attr_t a;
        void *lo;
        size_t size;
        /* May allocate (for the main thread it reads /proc/self/maps): the
         * caller holds in_site, so those allocations pass straight through. */
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            if (pthread_attr_getstack(&a, &lo, &size) == 0)
                stack_top = (uintptr_t)lo + size;
            pthread_attr_destroy(&a);
        }
    }
    return stack_top;
}

/* One `# alloc` line for an allocation of `size` bytes at `p`, with the call
 * path read from the frame-pointer chain (`hugescope cc` compiles with
 * -fno-omit-frame-pointer). Not backtrace(): its unwinder is a library of
 * its own (libgcc_s), which, loaded into a traced run only, would move every
 * later mapping and make the trace's addresses differ from a plain run's.
 * Each frame pointer is checked to lie above the previous one and below the
 * stack's top, so a chain broken by code without frame pointers ends the
 * walk (or yields frames that symbolize to nothing), never a bad read. Not
 * inlined: the walk starts at this function's own frame. */
static __attribute__((noinline)) void note_site(const char *call, const void *p, size_t size) {
    if (in_site || sites_fd < 0 || !p)
        return;
    in_site = 1;
    uintptr_t top = this_stack_top();
    char line[64 + (SITE_FRAMES + 1) * 20];
    int len = snprintf(line, sizeof line, "# alloc %s %zx %lx", call, size, (unsigned long)(uintptr_t)p);
    /* Frame 0 is this function's (its return address is in the wrapper);
     * the wrapper's return address, into the program, is the site's first. */
    uintptr_t *fp = (uintptr_t *)__builtin_frame_address(0);
    for (int depth = 0; depth < SITE_FRAMES + 1 && len > 0 && (size_t)len < sizeof line - 20; depth++) {
        if (!top || (uintptr_t)fp + 2 * sizeof(uintptr_t) > top || ((uintptr_t)fp & 7))
            break;
        uintptr_t ret = fp[1];
        uintptr_t *next = (uintptr_t *)fp[0];
        if (depth > 0 && ret)
            len += snprintf(line + len, sizeof line - (size_t)len, " %lx", (unsigned long)ret);
        if (next <= fp)
            break;
        fp = next;
    }
    if (len > 0 && (size_t)len < sizeof line - 1) {
        line[len++] = '\n';
        /* `lock`, as the maps snapshots: in the metadata a site line must
         * not land inside a snapshot written in several blocks. */
        pthread_mutex_lock(&lock);
        write_all(sites_fd, line, (size_t)len);
        pthread_mutex_unlock(&lock);
    }
    in_site = 0;
}

/* The program's allocator, interposed (the executable's definitions win over
 * libc's for every caller, libc's own included), each passing through to
 * glibc's exported implementation. Only large allocations pay for a site. */
void *malloc(size_t n) {
    void *p = __libc_malloc(n);
    if (__builtin_expect(n >= site_min && sites_fd >= 0, 0))
        note_site("malloc", p, n);
    return p;
}

void *calloc(size_t n, size_t size) {
    void *p = __libc_calloc(n, size);
    size_t total;
    if (__builtin_expect(sites_fd >= 0 && !__builtin_mul_overflow(n, size, &total) && total >= site_min, 0))
        note_site("calloc", p, total);
    return p;
}

void *realloc(void *old, size_t n) {
    void *p = __libc_realloc(old, n);
    if (__builtin_expect(n >= site_min && sites_fd >= 0, 0))
        note_site("realloc", p, n);
    return p;
}

void *memalign(size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    if (__builtin_expect(n >= site_min && sites_fd >= 0, 0))
        note_site("memalign", p, n);
    return p;
}

void *aligned_alloc(size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    if (__builtin_expect(n >= site_min && sites_fd >= 0, 0))
        note_site("aligned_alloc", p, n);
    return p;
}

int posix_memalign(void **out, size_t align, size_t n) {
    /* POSIX: a power of two multiple of sizeof(void *), else EINVAL. */
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p && n)
        return ENOMEM;
    *out = p;
    if (__builtin_expect(n >= site_min && sites_fd >= 0, 0))
        note_site("posix_memalign", p, n);
    return 0;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    void *p = raw_mmap(addr, len, prot, flags, fd, off);
    if (__builtin_expect((flags & MAP_ANONYMOUS) && len >= site_min && sites_fd >= 0 && p != MAP_FAILED, 0))
        note_site("mmap", p, len);
    return p;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    void *p = raw_mmap(addr, len, prot, flags, fd, off);
    if (__builtin_expect((flags & MAP_ANONYMOUS) && len >= site_min && sites_fd >= 0 && p != MAP_FAILED, 0))
        note_site("mmap", p, len);
    return p;
}

__attribute__((constructor(101))) static void start(void) {
    const char *out = getenv("HUGESCOPE_TRACE_OUT");
    const char *sites = getenv("HUGESCOPE_SITES_OUT");
    if (getenv("HUGESCOPE_SITE_MIN"))
        site_min = env_u64("HUGESCOPE_SITE_MIN");
    if ((!out || !*out) && sites && *sites) {
        /* Sites only (`hugescope run` of a plan by allocation site): the file
         * is the launcher's, made before the program started; never created
         * here, so a stray variable cannot make a file appear anywhere. */
        unsetenv("HUGESCOPE_SITES_OUT");
        int fd = open(sites, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd >= 0) {
            /* The executable and the code mappings, for the launcher to
             * symbolize with after the program has gone (a short run ends
             * before the launcher reads its /proc/PID/maps). */
            note_exe(fd);
            snapshot_maps_to(fd);
            write_all(fd, "# end\n", 6);
            pthread_atfork(NULL, NULL, in_child);
            sites_start(fd);
        }
        return;
    }
    unsetenv("HUGESCOPE_SITES_OUT");
    if (!out || !*out)
        return;
    out_fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out_fd < 0) {
        fprintf(stderr, "hugescope_trace: cannot open %s: %s\n", out, strerror(errno));
        return;
    }
    if (getenv("HUGESCOPE_TRACE_RESERVE"))
        reserve = env_u64("HUGESCOPE_TRACE_RESERVE");
    const char *meta = getenv("HUGESCOPE_TRACE_META");
    if (meta && *meta)
        meta_fd = open(meta, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    write_all(out_fd, "HSTRAW1\n", 8);
    if (meta_fd >= 0)
        note_exe(meta_fd);
    skip_n = env_u64("HUGESCOPE_TRACE_SKIP");
    record_n = env_u64("HUGESCOPE_TRACE_RECORD");
    windowed = skip_n || record_n;
    /* Only this process is traced: a program it executes must not open (and
     * truncate) the same files, and a forked child stops tracing. */
    unsetenv("HUGESCOPE_TRACE_OUT");
    unsetenv("HUGESCOPE_TRACE_META");
    pthread_atfork(NULL, NULL, in_child);
    pthread_key_create(&key, thread_done);
    atexit(finish);
    int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP};
    for (unsigned i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        signal(fatal[i], on_fatal);
    if (meta_fd >= 0)
        sites_start(meta_fd);
    active = 1;
}

static inline __attribute__((always_inline)) void put(const void *addr, uint64_t size_log2, uint64_t store) {
    if (__builtin_expect(!active, 0))
        return;
    if (windowed) {
        /* Counting continues past the window (one relaxed atomic add), so the
         * trace can say which share of the run it holds. */
        uint64_t k = __atomic_fetch_add(&seen, 1, __ATOMIC_RELAXED);
        if (k < skip_n || (record_n && k - skip_n >= record_n))
            return;
    }
    struct tbuf *b = mine;
    if (__builtin_expect(b == NULL, 0)) {
        b = mine = new_buffer();
        if (!b)
            return;
    }
    b->rec[b->n++] = ((uint64_t)(uintptr_t)addr & 0xffffffffffffull) | ((uint64_t)(b->tid & 0xff) << 48) |
                     (size_log2 << 56) | (store << 63);
    if (__builtin_expect(b->n == BUF_RECORDS, 0)) {
        pthread_mutex_lock(&lock);
        flush_locked(b, 1);
        pthread_mutex_unlock(&lock);
    }
}

#define HOOKS(N, LOG2)                                                                                       \
    void __sanitizer_cov_load##N(void *addr) { put(addr, LOG2, 0); }                                       \
    void __sanitizer_cov_store##N(void *addr) { put(addr, LOG2, 1); }
HOOKS(1, 0)
HOOKS(2, 1)
HOOKS(4, 2)
HOOKS(8, 3)
HOOKS(16, 4)

/* The base coverage kind's hooks (inline-8bit-counters needs this one; the
 * counters themselves are not used). */
void __sanitizer_cov_8bit_counters_init(char *start, char *end) {
    (void)start;
    (void)end;
}
void __sanitizer_cov_pcs_init(const uintptr_t *b, const uintptr_t *e) {
    (void)b;
    (void)e;
}
