# syntax=docker/dockerfile:1
# Build: SQLite is compiled in through cgo, so the build stage has a C compiler;
# the binary is linked statically so the runtime image needs no libc.
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

# Run: no shell, no package manager, a non-root user (uid and gid 65532, who
# must own the volume); the database lives in a volume, the config is mounted.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/signoff /usr/local/bin/signoff
WORKDIR /data
VOLUME ["/data"]
ENV SIGNOFF_DB=/data/signoff.db SIGNOFF_SHOP=/data/shop.db
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/signoff"]
CMD ["serve"]
