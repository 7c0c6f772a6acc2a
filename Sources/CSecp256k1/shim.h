/* libsecp256k1 (Debian 0.2.0): BIP-340 Schnorr signatures and x-only keys. No macros need shimming. */
#include <secp256k1.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>
