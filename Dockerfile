# The manager's image for those who build with Docker (docker buildx build
# --platform linux/amd64,linux/arm64 .). `make image` builds the same image
# without Docker or a base image; hack/image's tests keep the entrypoint,
# user and working directory of both in step.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager

# distroless/static:nonroot holds the CA certificates, /etc/passwd with the
# nonroot user 65532, and no shell.
FROM gcr.io/distroless/static:nonroot
# The chart's appVersion, which a test keeps in step.
ARG VERSION=v0.1.0
LABEL org.opencontainers.image.title=provfleet-manager \
      org.opencontainers.image.source=https://github.com/provfleet/provfleet \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build /out/manager /manager
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/manager"]
