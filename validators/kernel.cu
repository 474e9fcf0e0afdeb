// alloc-planner GPU harness: runs any plan's kernel program, given as a table of int32.
#define MAX_RECORDS 16u
#define RECORD_WORDS 7u
#define HEADER_WORDS 4
#define STEP_WORDS 4
#define ACCESS_WORDS 16
#define LOOP_WORDS 2

// Stamp of byte k of buffer b: 8 bits of a hash of (b, k).
__device__ __forceinline__ unsigned int mix32(unsigned int x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

__device__ __forceinline__ unsigned int stamp8(unsigned int b, unsigned int k) {
    return mix32(b * 0x9e3779b9u + k) & 0xffu;
}

// Stamps of the n <= 4 bytes from k, little-endian.
__device__ __forceinline__ unsigned int stamps(unsigned int b, unsigned int k, unsigned int n) {
    unsigned int v = 0u;
    for (unsigned int j = 0u; j < n; ++j) v |= stamp8(b, k + j) << (8u * j);
    return v;
}

// Sleep a hash of (seed, step, block, thread) nanoseconds, at most max_ns.
__device__ __forceinline__ void delay(unsigned int seed, unsigned int step, unsigned int blk,
                                      unsigned int t, unsigned int max_ns) {
    if (max_ns == 0u) return;
    const unsigned int h = mix32(seed ^ mix32(step * 0x9e3779b9u ^ mix32(blk * 0x85ebca6bu ^ t)));
    __nanosleep(h % (max_ns + 1u));
}

// Set bits [k, k + n) of a written-bitmap.
__device__ __forceinline__ void mark_written(unsigned int* bits, unsigned int k, unsigned int n) {
    const unsigned int stop = k + n;
    while (k < stop) {
        const unsigned int bit = k & 31u;
        const unsigned int run = min(32u - bit, stop - k);
        const unsigned int mask = run == 32u ? 0xffffffffu : ((1u << run) - 1u) << bit;
        atomicOr(bits + (k >> 5), mask);
        k += run;
    }
}

__device__ __forceinline__ unsigned int is_written(const unsigned int* bits, unsigned int k) {
    return (((const volatile unsigned int*)bits)[k >> 5] >> (k & 31u)) & 1u;
}

__device__ void report(unsigned int* result, unsigned int b, unsigned int k, unsigned int expected,
                       unsigned int found, unsigned int step, unsigned int blk, unsigned int t) {
    atomicAdd(result, 1u);
    const unsigned int slot = atomicAdd(result + 1, 1u);
    if (slot < MAX_RECORDS) {
        unsigned int* r = result + 2 + slot * RECORD_WORDS;
        r[0] = b; r[1] = k; r[2] = expected; r[3] = found; r[4] = step; r[5] = blk; r[6] = t;
    }
}

// Element e (w bytes) of buffer b at arena byte `offset`: the stamps, then the written bits.
__device__ void write_elem(unsigned char* arena, unsigned int* bits, unsigned int b,
                           unsigned int offset, unsigned int bitbase, unsigned int e,
                           unsigned int w) {
    const unsigned int k = e * w;
    unsigned char* p = arena + offset + k;
    if (w == 1u) {
        *(volatile unsigned char*)p = (unsigned char)stamp8(b, k);
    } else if (w == 2u) {
        *(volatile unsigned short*)p = (unsigned short)stamps(b, k, 2u);
    } else if (w == 4u) {
        *(volatile unsigned int*)p = stamps(b, k, 4u);
    } else if (w == 8u) {
        const unsigned long long hi = stamps(b, k + 4u, 4u);
        *(volatile unsigned long long*)p = (unsigned long long)stamps(b, k, 4u) | (hi << 32);
    } else if (w == 16u) {
        const unsigned int a = (unsigned int)__cvta_generic_to_shared(p);
        asm volatile("st.volatile.shared.v4.u32 [%0], {%1, %2, %3, %4};"
                     :: "r"(a), "r"(stamps(b, k, 4u)), "r"(stamps(b, k + 4u, 4u)),
                        "r"(stamps(b, k + 8u, 4u)), "r"(stamps(b, k + 12u, 4u)) : "memory");
    } else {
        for (unsigned int j = 0u; j < w; ++j) {
            ((volatile unsigned char*)p)[j] = (unsigned char)stamp8(b, k + j);
        }
    }
    __threadfence_block();  // the stamps before the bits that say they are there
    mark_written(bits, bitbase + k, w);
}

// Check element e (w bytes) of buffer b: each byte it has written must hold its stamp.
__device__ void read_elem(const unsigned char* arena, const unsigned int* bits,
                          unsigned int* result, unsigned int b, unsigned int offset,
                          unsigned int bitbase, unsigned int e, unsigned int w,
                          unsigned int step, unsigned int blk, unsigned int t) {
    const unsigned int k = e * w;
    const unsigned char* p = arena + offset + k;
    if (w == 1u || w == 2u || w == 4u || w == 8u || w == 16u) {
        // bitbase is a multiple of 32 and k of w, so the w bits lie in one bitmap word.
        const unsigned int at = bitbase + k;
        const unsigned int word = ((const volatile unsigned int*)bits)[at >> 5];
        const unsigned int written = (word >> (at & 31u)) & ((1u << w) - 1u);
        __threadfence_block();  // the bits before the stamps they vouch for
        unsigned int v[4] = {0u, 0u, 0u, 0u};
        if (w == 1u) {
            v[0] = *(const volatile unsigned char*)p;
        } else if (w == 2u) {
            v[0] = *(const volatile unsigned short*)p;
        } else if (w == 4u) {
            v[0] = *(const volatile unsigned int*)p;
        } else if (w == 8u) {
            const unsigned long long x = *(const volatile unsigned long long*)p;
            v[0] = (unsigned int)x;
            v[1] = (unsigned int)(x >> 32);
        } else {
            const unsigned int a = (unsigned int)__cvta_generic_to_shared(p);
            asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(a) : "memory");
        }
        for (unsigned int j = 0u; j < w; ++j) {
            const unsigned int found = (v[j >> 2] >> (8u * (j & 3u))) & 0xffu;
            const unsigned int expected = stamp8(b, k + j);
            if (((written >> j) & 1u) && found != expected) {
                report(result, b, k + j, expected, found, step, blk, t);
            }
        }
    } else {
        for (unsigned int j = 0u; j < w; ++j) {
            if (!is_written(bits, bitbase + k + j)) continue;
            __threadfence_block();
            const unsigned int found = ((const volatile unsigned char*)p)[j];
            const unsigned int expected = stamp8(b, k + j);
            if (found != expected) report(result, b, k + j, expected, found, step, blk, t);
        }
    }
}

// This thread's elements of one access.
__device__ void run_access(const int* acc, const int* loop_table, unsigned char* arena,
                           unsigned int* bits, unsigned int* result, unsigned int step,
                           unsigned int blk, unsigned int t) {
    const unsigned int b = (unsigned int)acc[0];
    const bool write = acc[1] == 0;
    const unsigned int w = (unsigned int)acc[2];
    const unsigned int offset = (unsigned int)acc[3];
    const unsigned int bitbase = (unsigned int)acc[4];
    const long long n = acc[5];
    if (acc[6]) {  // broadcast: every element, each thread starting at its own
        for (long long j = 0; j < n; ++j) {
            const unsigned int e = (unsigned int)((j + t) % n);
            if (write) write_elem(arena, bits, b, offset, bitbase, e, w);
            else read_elem(arena, bits, result, b, offset, bitbase, e, w, step, blk, t);
        }
        return;
    }
    const long long base = (long long)acc[7] * threadIdx.x + (long long)acc[8] * threadIdx.y
        + (long long)acc[9] * threadIdx.z + (long long)acc[10] * blockIdx.x
        + (long long)acc[11] * blockIdx.y + (long long)acc[12] * blockIdx.z + acc[13];
    const int* loops = loop_table + LOOP_WORDS * acc[14];
    const int nloops = acc[15];
    long long total = 1;
    for (int l = 0; l < nloops; ++l) total *= loops[LOOP_WORDS * l + 1];
    for (long long j = 0; j < total; ++j) {
        long long rest = j;
        long long e = base;
        for (int l = 0; l < nloops; ++l) {  // odometer: the first loop varies fastest
            const long long extent = loops[LOOP_WORDS * l + 1];
            e += loops[LOOP_WORDS * l] * (rest % extent);
            rest /= extent;
        }
        if (e < 0 || e >= n) continue;
        if (write) write_elem(arena, bits, b, offset, bitbase, (unsigned int)e, w);
        else read_elem(arena, bits, result, b, offset, bitbase, (unsigned int)e, w, step, blk, t);
    }
}

extern "C" __global__ void alloc_check(const int* __restrict__ table,
                                       unsigned int* __restrict__ result,
                                       unsigned int* __restrict__ written,
                                       unsigned int bitmap_words, unsigned int seed,
                                       unsigned int max_delay_ns) {
    extern __shared__ __align__(16) unsigned char arena[];
    const unsigned int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned int blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned int* const bits = written + (unsigned long long)blk * bitmap_words;
    const int steps = table[0];
    const int* const access_table = table + table[1];
    const int* const loop_table = table + table[2];
    for (int s = 0; s < steps; ++s) {
        const int* const step = table + HEADER_WORDS + STEP_WORDS * s;
        // Every thread reads the same table: a uniform branch, so the barrier is legal.
        if (step[1]) __syncthreads();
        if (step[3] == 0) continue;
        delay(seed, (unsigned int)s, blk, t, max_delay_ns);
        for (int a = step[2]; a < step[2] + step[3]; ++a) {
            run_access(access_table + ACCESS_WORDS * a, loop_table, arena, bits, result,
                       (unsigned int)s, blk, t);
        }
    }
}
