/* fuzz_input.h -- read a libFuzzer input as a stream of small choices.
   Past the end every read gives 0, so any prefix of an input is a valid
   (shorter) input and the fuzzer's mutations stay meaningful. */
#ifndef FUZZ_INPUT_H
#define FUZZ_INPUT_H
#include <stddef.h>
#include <stdint.h>

#define FZ_UNUSED __attribute__((unused))

typedef struct fz_in {
    const uint8_t *p;
    size_t n, at;
} fz_in;

static FZ_UNUSED uint8_t fz_u8(fz_in *in) { return in->at < in->n ? in->p[in->at++] : 0; }
static FZ_UNUSED int fz_more(const fz_in *in) { return in->at < in->n; }
static FZ_UNUSED uint16_t fz_u16(fz_in *in) { uint16_t a = fz_u8(in); return (uint16_t)(a | (uint16_t)(fz_u8(in) << 8)); }
static FZ_UNUSED uint32_t fz_u32(fz_in *in) { uint32_t a = fz_u16(in); return a | ((uint32_t)fz_u16(in) << 16); }
/* 0..n-1 (n > 0) */
static FZ_UNUSED uint32_t fz_pick(fz_in *in, uint32_t n) { return n <= 256 ? fz_u8(in) % n : fz_u32(in) % n; }

/* In the harnesses: the invariant checks abort (libFuzzer saves the input). */
#define FZ_CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "fuzz invariant broken: " __VA_ARGS__); \
    fprintf(stderr, "\n  (%s:%d: %s)\n", __FILE__, __LINE__, #cond); abort(); } } while (0)

#endif
