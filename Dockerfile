# bitchat-bridge: a headless bot that carries public chat between a geohash channel on Nostr and a
# bitchat BLE mesh. Multi-stage: build on the official Swift image (Debian 12), run on bookworm-slim with
# only the C runtime libraries (the Swift runtime is linked in statically).
#
#   docker build -t bitchat-bridge .
#   docker compose up -d            (see docker-compose.yml: host network, /run/dbus for BlueZ)
#
# No Docker engine on the project's machines: scripts/check-runtime-image proves the runtime stage by
# building the same static binary and running it in a debootstrap chroot holding exactly RUNTIME_PACKAGES.

ARG SWIFT_IMAGE=swift:6.3-bookworm

FROM ${SWIFT_IMAGE} AS build
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends pkg-config \
        libwebsockets-dev libsecp256k1-dev libssl-dev libsqlite3-dev zlib1g-dev libsystemd-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# SwiftPM refuses a manifest whose declared targets have no folder, so Tests/ comes along (≈0.5 MB);
# only the bitchat-bridge product is built. scripts/check-runtime-image builds from exactly these COPY lines.
COPY Package.swift relays.json ./
COPY Sources ./Sources
COPY Tests ./Tests
# The commit bitchat_bridge_build_info{commit} names (the context has no .git):
#   docker build --build-arg BRIDGE_COMMIT=$(git rev-parse --short=12 HEAD) .   (compose passes $BRIDGE_COMMIT)
ARG BRIDGE_COMMIT=unknown
RUN sed -i "s/public static let commit = \"[^\"]*\"/public static let commit = \"${BRIDGE_COMMIT}\"/" Sources/BridgeApp/BuildCommit.swift \
    && grep -q "\"${BRIDGE_COMMIT}\"" Sources/BridgeApp/BuildCommit.swift
RUN swift build -c release --static-swift-stdlib --product bitchat-bridge \
    && install -D -m 0755 "$(swift build -c release --static-swift-stdlib --show-bin-path)/bitchat-bridge" /out/bitchat-bridge \
    && strip /out/bitchat-bridge \
    && /out/bitchat-bridge --version

FROM debian:bookworm-slim AS runtime
# The C libraries the binary links (ldd: lws, secp256k1, ssl/crypto, sqlite3, z, systemd) and the CA store
# for wss:// relays. scripts/check-runtime-image reads this line: keep it one line, names only.
ARG RUNTIME_PACKAGES="libwebsockets17 libsecp256k1-1 libssl3 libsqlite3-0 zlib1g libsystemd0 ca-certificates"
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends ${RUNTIME_PACKAGES} \
    && rm -rf /var/lib/apt/lists/*

# A fixed, unprivileged UID: the host's D-Bus policy for BlueZ names it (contrib/dbus-bitchat-bridge.conf
# and README "Running as a non-root user").
ARG BRIDGE_UID=10001
RUN groupadd --system --gid ${BRIDGE_UID} bitchat-bridge \
    && useradd --system --uid ${BRIDGE_UID} --gid ${BRIDGE_UID} --home-dir /data --shell /usr/sbin/nologin bitchat-bridge \
    && install -d -m 0700 -o bitchat-bridge -g bitchat-bridge /data

COPY --from=build /out/bitchat-bridge /usr/local/bin/bitchat-bridge
COPY --from=build /src/relays.json /usr/share/bitchat-bridge/relays.json

ENV BRIDGE_DATA_DIR=/data \
    BRIDGE_HTTP_LISTEN=127.0.0.1:9477
VOLUME /data
USER bitchat-bridge
WORKDIR /data

# `status` reads /healthz on the loopback listener: exit 0 healthy, 1 unhealthy or unreachable.
# (With BRIDGE_HTTP_LISTEN=off there is nothing to probe: override the healthcheck then.)
HEALTHCHECK --interval=30s --timeout=10s --start-period=40s --retries=3 \
    CMD ["/usr/local/bin/bitchat-bridge", "status"]

# SIGTERM (docker stop) is the graceful stop; the default 10 s stop timeout covers its 5 s budget.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/bitchat-bridge"]
CMD ["run"]
