/* Minting secret tokens: API tokens ("ty_...", auth.c) and the cluster join token ("tyc_...",
 * control.c). Only a token's SHA-256 is kept anywhere but in the hands of whoever it was given
 * to. */
#ifndef SRV_TOKEN_H
#define SRV_TOKEN_H

#include <stddef.h>

#define SRV_TOKEN_RANDOM_BYTES 20 /* 160 bits, written as 40 hex digits */
/* Room for a token with a prefix of at most 7 bytes, and its NUL. */
#define SRV_TOKEN_MAX 48

/* Formats `prefix` followed by the lowercase hex of raw[0..n) into out[0..size). Pure.
 * Returns the token's length, or -1 when it does not fit (out is then ""). */
int srv_token_format(const char *prefix, const unsigned char *raw, size_t n, char *out,
                     size_t size);

/* Makes a new random token: `prefix` then 40 hex digits from the system's random source, into
 * token[0..size), and (when hash is not NULL) its SHA-256 in hex. Returns 0, or -1 when the
 * random source fails or the token does not fit. */
int srv_token_mint(const char *prefix, char *token, size_t size, char hash[65]);

#endif
