/* The JSONL field scanner's line parser (wrapped by _scan.pyx).
 *
 * It reads a line only when it can prove orjson reads it the same way: a flat or nested JSON
 * object, keys and strings without escapes (UTF-8 checked as strictly as orjson: no surrogates,
 * no overlong forms), numbers by JSON's grammar (ints within int64, floats finite), true,
 * false, null, JSON whitespace. Anything else (escapes, big ints, infinities, deep nesting, a
 * syntax error, any other top-level value) answers WS_FALLBACK, and Python decodes that line
 * with orjson itself. A duplicate key's last value wins, as in orjson's dict.
 *
 * A line is not bounded before it is parsed (that took a memchr call per line): the parser
 * reads on towards the block's end and the line ends at the first \n it meets. It cannot read
 * past that \n: to it a \n is not whitespace, and no token holds one (a string's control byte
 * falls back, a number or literal stops or fails at it). So each step that would have hit the
 * end of the line, had the line been cut at its \n first (where \n is JSON whitespace), hits
 * the \n instead and fails the same way; and the line is read, blank or not, exactly as before.
 * Only a line that falls back needs its end looked up (memchr).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

enum { WS_OK = 0, WS_BLANK = 1, WS_FALLBACK = 2 };
enum { T_ABSENT = 0, T_NULL = 1, T_FALSE = 2, T_TRUE = 3, T_INT = 4, T_FLOAT = 5, T_STR = 6 };
#define W_MAX_DEPTH 64
#define W_GUESSES 32  /* a line's first keys whose field the next line tries first */

/* a name's first 16 bytes as two words, zero padded, and masks of its length (endian-neutral:
 * both are loaded from bytes, as the keys are) */
typedef struct { uint64_t w[2], m[2]; } w_name;

typedef struct {
    int nf;
    const unsigned char **names;
    const int *name_len;
    w_name *words;        /* w_prepare's */
    int guess[W_GUESSES]; /* the field the k-th key of the line before matched, -1: none */
    int64_t n;            /* rows: outputs are [field * n + row] */
    unsigned char *tags;
    int64_t *iv;
    double *fv;
    int64_t *ss;
    int32_t *sl;
} w_out;

/* how many bytes of [p, p + n) equal b. The compiler vectorises the inner loop: 64 one-byte
 * counters, each summed out before it could wrap (255 rounds). An 800 KB block takes ~8 us,
 * where a memchr call per line took ~66 us and numpy's `== 10` ~50 us with a temporary. */
static int64_t w_count_byte(const unsigned char *p, int64_t n, unsigned char b) {
    int64_t count = 0;
    while (n > 0) {
        int64_t m = n < 255 * 64 ? n : 255 * 64, i = 0;
        unsigned char acc[64] = {0};
        int k;
        for (; i + 64 <= m; i += 64)
            for (k = 0; k < 64; k++) acc[k] += p[i + k] == b;
        for (k = 0; k < 64; k++) count += acc[k];
        for (; i < m; i++) count += p[i] == b;
        p += m;
        n -= m;
    }
    return count;
}

static inline uint64_t w_load8(const unsigned char *p) {
    uint64_t x;
    memcpy(&x, p, 8);  /* one unaligned load */
    return x;
}

/* o's words and guesses from its names; 0, or -1 out of memory (free words with free()) */
static int w_prepare(w_out *o) {
    int j, k;
    o->words = (w_name *)malloc(((size_t)o->nf + 1) * sizeof(w_name));
    if (!o->words) return -1;
    for (j = 0; j < o->nf; j++) {
        unsigned char w[16] = {0}, m[16] = {0};
        size_t len = o->name_len[j] < 16 ? (size_t)o->name_len[j] : 16;
        memcpy(w, o->names[j], len);
        memset(m, 0xff, len);
        memcpy(o->words[j].w, w, 16);
        memcpy(o->words[j].m, m, 16);
    }
    for (k = 0; k < W_GUESSES; k++) o->guess[k] = -1;
    return 0;
}

/* is the key [ks, ks + klen) field j's name, byte for byte? A name of up to 16 bytes is two
 * masked 8-byte compares when the block holds 16 bytes from ks on (all but its last key or
 * so), not a memcmp call: the call, for a name of 2 to 10 bytes, was most of a match's cost */
static inline int w_is_name(const w_out *o, int j, const unsigned char *ks, int klen,
                            const unsigned char *e) {
    if (o->name_len[j] != klen) return 0;
    if (klen <= 16 && e - ks >= 16) {
        const w_name *n = &o->words[j];
        return (((w_load8(ks) & n->m[0]) ^ n->w[0]) | ((w_load8(ks + 8) & n->m[1]) ^ n->w[1]))
               == 0;
    }
    return memcmp(o->names[j], ks, (size_t)klen) == 0;
}

/* JSON whitespace but \n, which ends the line (see the top) */
static inline int w_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\r'; }

static inline const unsigned char *w_skip_ws(const unsigned char *p, const unsigned char *e) {
    while (p < e && w_ws(*p)) p++;
    return p;
}

/* strict UTF-8 over [p, e): what Python's decoder (and orjson) accepts */
static int w_utf8_ok(const unsigned char *p, const unsigned char *e) {
    while (p < e) {
        unsigned char c = *p;
        if (c < 0x80) { p++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (e - p < 2 || (p[1] & 0xC0) != 0x80) return 0;
            p += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (e - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && p[1] < 0xA0) return 0;  /* overlong */
            if (c == 0xED && p[1] >= 0xA0) return 0; /* surrogates */
            p += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (e - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
                (p[3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && p[1] < 0x90) return 0;  /* overlong */
            if (c == 0xF4 && p[1] >= 0x90) return 0; /* past U+10FFFF */
            p += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* a string at p (the opening quote); returns the byte after the closing quote, NULL to fall
 * back; *s and *se bound its content */
static const unsigned char *w_string(const unsigned char *p, const unsigned char *e,
                                     const unsigned char **s, const unsigned char **se) {
    const unsigned char *q = p + 1;
    int high = 0;
    while (q < e) {
        unsigned char c = *q;
        if (c == '"') break;
        if (c == '\\' || c < 0x20) return NULL;
        high |= c & 0x80;
        q++;
    }
    if (q >= e) return NULL;
    if (high && !w_utf8_ok(p + 1, q)) return NULL;
    *s = p + 1;
    *se = q;
    return q + 1;
}

static const double W_POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* a number at p by JSON's grammar; returns the byte after it or NULL to fall back; *tag is
 * T_INT (*iv) or T_FLOAT (*fv) */
static const unsigned char *w_number(const unsigned char *p, const unsigned char *e, int *tag,
                                     int64_t *iv, double *fv) {
    const unsigned char *start = p;
    int neg = 0;
    if (p < e && *p == '-') { neg = 1; p++; }
    if (p >= e || *p < '0' || *p > '9') return NULL;
    const unsigned char *ds = p;
    uint64_t mant = 0;
    int digits = 0;  /* significant digits gathered into mant (leading zeros skipped) */
    if (*p == '0') {
        p++;
        if (p < e && *p >= '0' && *p <= '9') return NULL;  /* leading zero */
    } else {
        while (p < e && *p >= '0' && *p <= '9') {
            if (digits < 19) mant = mant * 10 + (uint64_t)(*p - '0');
            digits++;
            p++;
        }
    }
    int int_digits = (int)(p - ds);
    int frac_digits = 0, is_float = 0;
    int64_t exp10 = 0;
    if (p < e && *p == '.') {
        is_float = 1;
        p++;
        const unsigned char *fs = p;
        while (p < e && *p >= '0' && *p <= '9') {
            if (digits < 19 && !(digits == 0 && *p == '0')) {
                mant = mant * 10 + (uint64_t)(*p - '0');
                digits++;
                exp10--;
            } else if (digits == 0) {
                exp10--;  /* a leading zero of the fraction */
            } else {
                digits++;  /* past 19 digits: strtod decides */
            }
            p++;
        }
        frac_digits = (int)(p - fs);
        if (frac_digits == 0) return NULL;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        int eneg = 0;
        if (p < e && (*p == '+' || *p == '-')) { eneg = *p == '-'; p++; }
        if (p >= e || *p < '0' || *p > '9') return NULL;
        int64_t ev = 0;
        while (p < e && *p >= '0' && *p <= '9') {
            if (ev < 100000) ev = ev * 10 + (*p - '0');
            p++;
        }
        exp10 += eneg ? -ev : ev;
    }
    if (!is_float) {
        if (int_digits > 19) return NULL;
        if (int_digits == 19) {
            /* within int64? (orjson reads up to u64 as an int, beyond as a float: fall back) */
            if (mant > (uint64_t)INT64_MAX + (uint64_t)neg) return NULL;
            if (mant < 1000000000000000000ULL) return NULL;  /* wrapped: cannot happen */
        }
        *tag = T_INT;
        *iv = neg ? (int64_t)(0 - mant) : (int64_t)mant;
        return p;
    }
    *tag = T_FLOAT;
    if (digits <= 15 && exp10 >= -22 && exp10 <= 22) {
        /* Clinger's fast path: mant and 10^|exp10| are exact doubles, so one correctly
         * rounded operation gives the correctly rounded value */
        double d = (double)mant;
        d = exp10 < 0 ? d / W_POW10[-exp10] : d * W_POW10[exp10];
        *fv = neg ? -d : d;
        return p;
    }
    char buf[72];
    size_t len = (size_t)(p - start);
    if (len >= sizeof buf) return NULL;
    memcpy(buf, start, len);
    buf[len] = 0;
    char *end = NULL;
    double d = strtod(buf, &end);
    if (end != buf + len || isinf(d)) return NULL;  /* orjson refuses infinities */
    *fv = d;
    return p;
}

static const unsigned char *w_skip_value(const unsigned char *p, const unsigned char *e,
                                         int depth);

static const unsigned char *w_skip_container(const unsigned char *p, const unsigned char *e,
                                             int depth) {
    unsigned char close = *p == '{' ? '}' : ']';
    int obj = *p == '{';
    if (depth > W_MAX_DEPTH) return NULL;
    p = w_skip_ws(p + 1, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
        const unsigned char *s, *se;
        if (obj) {
            if (p >= e || *p != '"') return NULL;
            p = w_string(p, e, &s, &se);
            if (!p) return NULL;
            p = w_skip_ws(p, e);
            if (p >= e || *p != ':') return NULL;
            p = w_skip_ws(p + 1, e);
        }
        p = w_skip_value(p, e, depth + 1);
        if (!p) return NULL;
        p = w_skip_ws(p, e);
        if (p >= e) return NULL;
        if (*p == close) return p + 1;
        if (*p != ',') return NULL;
        p = w_skip_ws(p + 1, e);
    }
}

static inline const unsigned char *w_literal(const unsigned char *p, const unsigned char *e,
                                             const char *word, size_t n) {
    if ((size_t)(e - p) < n || memcmp(p, word, n) != 0) return NULL;
    return p + n;
}

static const unsigned char *w_skip_value(const unsigned char *p, const unsigned char *e,
                                         int depth) {
    const unsigned char *s, *se;
    int tag;
    int64_t iv;
    double fv;
    if (p >= e) return NULL;
    switch (*p) {
    case '"': return w_string(p, e, &s, &se);
    case '{': case '[': return w_skip_container(p, e, depth);
    case 't': return w_literal(p, e, "true", 4);
    case 'f': return w_literal(p, e, "false", 5);
    case 'n': return w_literal(p, e, "null", 4);
    default: return w_number(p, e, &tag, &iv, &fv);
    }
}

/* whitespace as bytes.isspace has it (a line of only these is blank), but \n */
static inline int w_blank_byte(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == 0x0b || c == 0x0c;
}

/* the object at p up to its line's end: the \n (or e) after it, with the fields written; NULL
 * to fall back */
static const unsigned char *w_object(const unsigned char *base, const unsigned char *p,
                                     const unsigned char *e, int64_t row, w_out *o) {
    int j, keys = 0;
    p = w_skip_ws(p, e);
    if (p >= e || *p != '{') return NULL;
    p = w_skip_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
    } else {
        for (;;) {
            const unsigned char *ks, *kse, *s, *se;
            if (p >= e || *p != '"') return NULL;
            p = w_string(p, e, &ks, &kse);
            if (!p) return NULL;
            p = w_skip_ws(p, e);
            if (p >= e || *p != ':') return NULL;
            p = w_skip_ws(p + 1, e);
            if (p >= e) return NULL;
            /* JSONL lines almost always repeat one key order: the field the k-th key matched
             * in the line before is tried first, the others (in order: the first equal name
             * wins, as before) only when it is not this key's */
            int field = -1, klen = (int)(kse - ks), k = keys++;
            int guess = k < W_GUESSES ? o->guess[k] : -1;
            if (guess >= 0 && w_is_name(o, guess, ks, klen, e)) {
                field = guess;
            } else {
                for (j = 0; j < o->nf; j++) {
                    if (j != guess && w_is_name(o, j, ks, klen, e)) {
                        field = j;
                        break;
                    }
                }
                if (k < W_GUESSES) o->guess[k] = field;
            }
            if (field < 0) {
                p = w_skip_value(p, e, 1);
                if (!p) return NULL;
            } else {
                int64_t at = (int64_t)field * o->n + row;
                int tag;
                switch (*p) {
                case '"':
                    p = w_string(p, e, &s, &se);
                    if (!p) return NULL;
                    o->tags[at] = T_STR;
                    o->ss[at] = (int64_t)(s - base);
                    o->sl[at] = (int32_t)(se - s);
                    break;
                case 't':
                    p = w_literal(p, e, "true", 4);
                    o->tags[at] = T_TRUE;
                    break;
                case 'f':
                    p = w_literal(p, e, "false", 5);
                    o->tags[at] = T_FALSE;
                    break;
                case 'n':
                    p = w_literal(p, e, "null", 4);
                    o->tags[at] = T_NULL;
                    break;
                case '{': case '[':
                    return NULL;  /* a nested value in a wanted field: orjson's object */
                default:
                    p = w_number(p, e, &tag, &o->iv[at], &o->fv[at]);
                    o->tags[at] = (unsigned char)tag;
                }
                if (!p) return NULL;
            }
            p = w_skip_ws(p, e);
            if (p >= e) return NULL;
            if (*p == '}') { p++; break; }
            if (*p != ',') return NULL;
            p = w_skip_ws(p + 1, e);
        }
    }
    p = w_skip_ws(p, e);
    return p == e || *p == '\n' ? p : NULL;
}

/* the line at base + start in a block of size bytes: WS_OK with its fields written, WS_BLANK
 * or WS_FALLBACK; *line_end: where it ends (after its \n, or the block's end) */
static int w_scan_line(const unsigned char *base, int64_t start, int64_t size, int64_t row,
                       w_out *o, int64_t *line_end) {
    const unsigned char *p = base + start, *e = base + size, *q = p;
    int j, status = WS_BLANK;
    for (j = 0; j < o->nf; j++) o->tags[j * o->n + row] = T_ABSENT;
    while (q < e && w_blank_byte(*q)) q++;
    if (q < e && *q != '\n') {
        q = w_object(base, p, e, row, o);
        status = q ? WS_OK : WS_FALLBACK;
        if (!q) q = (const unsigned char *)memchr(p, '\n', (size_t)(e - p));
        if (!q) q = e;
    }
    *line_end = (q < e ? q + 1 : e) - base;
    return status;
}
