# bolide in a small image: one static (musl) binary on Alpine, whose shell runs the pods' command
# that `bolide k8s` writes (the run, then its result document between marker lines).
#   docker build -t registry.example/bolide:0.1.0 .
#   docker run --rm --network host registry.example/bolide:0.1.0 demo --quick
FROM rust:1-alpine AS build
# A C compiler for the bundled C parts (mimalloc, ring); musl links everything statically.
RUN apk add --no-cache build-base
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p bolide \
    && cp target/release/bolide /bolide \
    && strip /bolide

FROM alpine:3
RUN adduser -D -H -u 10001 bolide
COPY --from=build /bolide /usr/local/bin/bolide
USER 10001
ENTRYPOINT ["bolide"]
CMD ["--help"]
