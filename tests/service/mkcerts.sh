#!/usr/bin/env bash
# Make a throwaway PKI for the TLS tests in DIR: a CA, a server certificate
# for 127.0.0.1/localhost and a client certificate signed by it, and a second
# "rogue" CA with its own client certificate (which the server must refuse).
# Usage: mkcerts.sh DIR   (keys are EC P-256; everything valid for one day)
set -euo pipefail
dir=$1
cd "$dir"
ca() { # ca NAME: a self-signed CA certificate and key
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
        -subj "/CN=muster test $1" -keyout "$1.key" -out "$1.pem" 2>/dev/null
}
leaf() { # leaf NAME CA EXT: a key and a certificate signed by CA with extensions EXT
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$1.key" -out "$1.csr" 2>/dev/null
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 1 \
        -extfile "$1.ext" -out "$1.pem" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
ca ca
ca rogue
leaf server ca "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
leaf client ca "extendedKeyUsage=clientAuth"
leaf intruder rogue "extendedKeyUsage=clientAuth"
