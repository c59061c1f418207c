# syntax=docker/dockerfile:1
# Build: SQLite is compiled in through cgo, so the build stage has a C compiler;
# the binary is linked statically so the runtime image needs no libc. It
# carries Go's time zone database (time/tzdata, imported by the config), so
# the digests' zones load in any image, whatever it ships.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The context has no .git, so the revision is passed in for --version:
# docker build --build-arg REVISION=$(git rev-parse HEAD) .
ARG REVISION
RUN CGO_ENABLED=1 go build -trimpath \
      -tags osusergo,netgo,sqlite_omit_load_extension \
      -ldflags "-s -w -X main.revision=${REVISION} -extldflags '-static'" \
      -o /out/signoff ./cmd/signoff

# Run with Debian (docker build --target debian): for a config with command
# executors, whose programs run in the container and need their interpreter
# in the image (python3 here, for examples/command; install what yours need
# in an image of your own FROM this one). The same user, volume and entry.
FROM debian:bookworm-slim AS debian
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nonroot \
 && mkdir /data && chown 65532:65532 /data
COPY --from=build /out/signoff /usr/local/bin/signoff
WORKDIR /data
VOLUME ["/data"]
# Metrics and the probes on their own port, apart from the one Slack and
# agents reach: publish or route 9090 only to Prometheus and the orchestrator.
ENV SIGNOFF_DB=/data/signoff.db SIGNOFF_SHOP=/data/shop.db SIGNOFF_ADMIN_ADDR=:9090
EXPOSE 8080 9090
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/signoff"]
CMD ["serve"]

# Run (the default, last target): no shell, no package manager, no
# interpreter, a non-root user (uid and gid 65532, who must own the volume);
# the database lives in a volume, the config is mounted.
FROM gcr.io/distroless/static-debian12:nonroot AS static
COPY --from=build /out/signoff /usr/local/bin/signoff
WORKDIR /data
VOLUME ["/data"]
# Metrics and the probes on their own port, apart from the one Slack and
# agents reach: publish or route 9090 only to Prometheus and the orchestrator.
ENV SIGNOFF_DB=/data/signoff.db SIGNOFF_SHOP=/data/shop.db SIGNOFF_ADMIN_ADDR=:9090
EXPOSE 8080 9090
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/signoff"]
CMD ["serve"]
