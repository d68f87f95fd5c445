/* SanitizerCoverage trace-pc-guard callbacks: one 8-bit hit counter per instrumented edge.
 * Rust code built with `-C passes=sancov-module` and
 * `-C llvm-args=-sanitizer-coverage-trace-pc-guard` calls these; a build without those flags
 * never does, and the counters stay zero (the fuzzer then mutates without feedback). */
#include <stdint.h>
#include <string.h>

#define BOLIDE_FUZZ_MAX_EDGES (1u << 21)

static uint8_t counters[BOLIDE_FUZZ_MAX_EDGES];
static uint32_t edges;

void __sanitizer_cov_trace_pc_guard_init(uint32_t *start, uint32_t *stop) {
    if (start == stop || *start != 0) {
        return;
    }
    for (uint32_t *g = start; g < stop; g++) {
        /* Guard 0 means "not counted"; ids past the table share its last slot. */
        edges = edges + 1 < BOLIDE_FUZZ_MAX_EDGES ? edges + 1 : BOLIDE_FUZZ_MAX_EDGES - 1;
        *g = edges;
    }
}

void __sanitizer_cov_trace_pc_guard(uint32_t *guard) {
    uint8_t *c = &counters[*guard];
    if (*c != 255) {
        (*c)++;
    }
}

uint8_t *bolide_fuzz_counters(void) { return counters; }

uint32_t bolide_fuzz_edges(void) { return edges; }

void bolide_fuzz_reset(void) { memset(counters, 0, (size_t)edges + 1); }

/* libFuzzer's hit-count buckets: 1, 2, 3, 4-7, 8-15, 16-31, 32-127, 128+. */
static uint8_t bucket(uint8_t hits) {
    if (hits >= 128) return 128;
    if (hits >= 32) return 64;
    if (hits >= 16) return 32;
    if (hits >= 8) return 16;
    if (hits >= 4) return 8;
    if (hits == 3) return 4;
    return hits; /* 0, 1, 2 */
}

/* Folds the counters of the last input into `seen` (one byte per edge, one bit per bucket) and
 * returns how many (edge, bucket) pairs were new. Written in C so that the scan, which touches
 * every edge, is not itself instrumented. */
uint64_t bolide_fuzz_merge(uint8_t *seen) {
    uint64_t fresh = 0;
    for (uint32_t i = 0; i <= edges; i++) {
        uint8_t c = counters[i];
        if (c) {
            uint8_t b = bucket(c);
            if (!(seen[i] & b)) {
                seen[i] |= b;
                fresh++;
            }
        }
    }
    return fresh;
}
