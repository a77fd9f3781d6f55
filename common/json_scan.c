/* See json_scan.h for what this module does and its contract. */
#include "json_scan.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t jscan_space(const char *text, size_t len, size_t i)
{
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    return i;
}

static int hex4(const char *text, size_t len, size_t i)
{
    if (i > len || len - i < 4)
        return -1;
    int v = 0;
    for (size_t k = i; k < i + 4; k++) {
        char c = text[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

size_t jscan_utf8_length(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80; /* overlong */
        hi = c == 0xED ? 0x9F : 0xBF; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        lo = c == 0xF0 ? 0x90 : 0x80; /* overlong */
        hi = c == 0xF4 ? 0x8F : 0xBF; /* above U+10FFFF */
    } else
        return 0;
    if (n < need || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < need; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return need;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t jscan_string(const char *text, size_t len, size_t i, char *out, size_t *out_len,
                    bool *escaped)
{
    size_t n = 0;
    if (escaped)
        *escaped = false;
    if (i >= len || text[i] != '"')
        return 0;
    for (i++; i < len;) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"') {
            if (out_len)
                *out_len = n;
            return i + 1;
        }
        if (c < 0x20)
            return 0;
        if (c != '\\') {
            size_t k = jscan_utf8_length((const unsigned char *)text + i, len - i);
            if (k == 0)
                return 0;
            if (out)
                memcpy(out + n, text + i, k);
            n += k;
            i += k;
            continue;
        }
        if (escaped)
            *escaped = true;
        if (++i >= len)
            return 0;
        static const char plain[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
        const char *p = text[i] ? strchr(plain, text[i]) : NULL;
        if (p != NULL) {
            if (out)
                out[n] = decoded[p - plain];
            n++;
            i++;
            continue;
        }
        if (text[i] != 'u')
            return 0;
        int cp = hex4(text, len, i + 1);
        if (cp <= 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) /* \u0000, or a lone low surrogate */
            return 0;
        i += 5;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (len - i < 2 || text[i] != '\\' || text[i + 1] != 'u')
                return 0;
            int low = hex4(text, len, i + 2);
            if (low < 0xDC00 || low > 0xDFFF)
                return 0;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            i += 6;
        }
        char buf[4];
        size_t k = put_utf8(out ? out + n : buf, (unsigned)cp);
        n += k;
    }
    return 0;
}

static size_t digits(const char *text, size_t len, size_t i)
{
    while (i < len && text[i] >= '0' && text[i] <= '9')
        i++;
    return i;
}

size_t jscan_number(const char *text, size_t len, size_t i, bool *integer)
{
    *integer = true;
    if (i < len && text[i] == '-')
        i++;
    if (i >= len || text[i] < '0' || text[i] > '9')
        return 0;
    i = text[i] == '0' ? i + 1 : digits(text, len, i);
    if (i < len && text[i] == '.') {
        size_t f = digits(text, len, i + 1);
        if (f == i + 1)
            return 0;
        i = f;
        *integer = false;
    }
    if (i < len && (text[i] == 'e' || text[i] == 'E')) {
        i++;
        if (i < len && (text[i] == '+' || text[i] == '-'))
            i++;
        size_t e = digits(text, len, i);
        if (e == i)
            return 0;
        i = e;
        *integer = false;
    }
    return i;
}

/* Clinger's fast path: a real whose digits, read as an integer m, stay below 2^53 and whose
 * power of ten p is exact in a double (|p| <= 22) is m * 10^p or m / 10^-p, one correctly rounded
 * operation: exactly what strtod returns, without its arbitrary-precision arithmetic. False for
 * any other (strtod reads it). */
static bool fast_real(const char *s, size_t n, double *value)
{
    static const double exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    size_t k = 0;
    bool negative = k < n && s[k] == '-';
    k += negative;
    uint64_t m = 0;
    int p = 0;
    for (bool fraction = false; k < n && (s[k] == '.' || (s[k] >= '0' && s[k] <= '9')); k++) {
        if (s[k] == '.') {
            fraction = true;
            continue;
        }
        if (m >= (UINT64_C(1) << 53) / 10 + 1)
            return false;
        m = m * 10 + (uint64_t)(s[k] - '0');
        p -= fraction;
    }
    if (k < n) { /* the exponent: [eE][+-]digits */
        bool down = s[++k] == '-';
        k += s[k] == '-' || s[k] == '+';
        int e = 0;
        for (; k < n; k++)
            if ((e = e * 10 + (s[k] - '0')) > 1000)
                return false;
        p += down ? -e : e;
    }
    if (m > (UINT64_C(1) << 53) || p < -22 || p > 22)
        return false;
    double v = p >= 0 ? (double)m * exact[p] : (double)m / exact[-p];
    *value = negative ? -v : v;
    return true;
}

int jscan_number_value(const char *text, size_t i, size_t end, bool integer, int64_t *as_int,
                       double *value)
{
    if (!integer && fast_real(text + i, end - i, value))
        return 0;
    char buf[65];
    if (end - i >= sizeof(buf))
        return -1;
    memcpy(buf, text + i, end - i);
    buf[end - i] = '\0';
    errno = 0;
    if (integer) {
        long long v = strtoll(buf, NULL, 10);
        if (errno == ERANGE)
            return -1;
        *as_int = v;
        *value = (double)v;
        return 0;
    }
    double v = strtod(buf, NULL);
    if (isinf(v))
        return -1;
    *value = v;
    return 0;
}

static size_t literal(const char *text, size_t len, size_t i, const char *word)
{
    size_t n = strlen(word);
    if (len - i < n || memcmp(text + i, word, n) != 0)
        return 0;
    return i + n;
}

static size_t value_at(const char *text, size_t len, size_t i, int depth)
{
    if (i >= len)
        return 0;
    char c = text[i];
    if (c == '"')
        return jscan_string(text, len, i, NULL, NULL, NULL);
    if (c == '-' || (c >= '0' && c <= '9')) {
        bool integer;
        return jscan_number(text, len, i, &integer);
    }
    if (c == 't')
        return literal(text, len, i, "true");
    if (c == 'f')
        return literal(text, len, i, "false");
    if (c == 'n')
        return literal(text, len, i, "null");
    if ((c != '{' && c != '[') || depth >= JSCAN_MAX_DEPTH)
        return 0;
    char close = c == '{' ? '}' : ']';
    i = jscan_space(text, len, i + 1);
    if (i < len && text[i] == close)
        return i + 1;
    for (;;) {
        if (c == '{') {
            i = jscan_string(text, len, i, NULL, NULL, NULL);
            if (i == 0)
                return 0;
            i = jscan_space(text, len, i);
            if (i >= len || text[i] != ':')
                return 0;
            i = jscan_space(text, len, i + 1);
        }
        i = value_at(text, len, i, depth + 1);
        if (i == 0)
            return 0;
        i = jscan_space(text, len, i);
        if (i >= len)
            return 0;
        if (text[i] == close)
            return i + 1;
        if (text[i] != ',')
            return 0;
        i = jscan_space(text, len, i + 1);
    }
}

size_t jscan_value(const char *text, size_t len, size_t i)
{
    return value_at(text, len, i, 0);
}
