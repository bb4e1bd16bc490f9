# The relay (`happy server`) as an image: the static Linux binary of a
# release build and nothing else (no shell, no libc; happy carries its
# fallback root CAs). Build it from dist/, which `make release` or
# `make release-snapshot` writes:
#
#   make release-snapshot
#   docker buildx build --platform linux/amd64,linux/arm64 -t happy-relay .
#   docker run -d -p 3005:3005 -v happy-relay:/data happy-relay
#
# No HEALTHCHECK: the image has no shell or HTTP client and happy has no
# probe command; let the orchestrator probe GET /ready on port 3005 (200
# when the relay serves, 503 while its database or bus is away), as
# docs/deploy.md, "The relay as a container image", shows.
FROM scratch
ARG TARGETARCH
COPY dist/happy_linux_${TARGETARCH}_*/happy /usr/local/bin/happy
# The happy home: the relay's data in /data/server (SQLite, secrets,
# attachments), its logs in /data/logs.
ENV HAPPY_HOME_DIR=/data
USER 65532:65532
WORKDIR /data
VOLUME /data
EXPOSE 3005
ENTRYPOINT ["/usr/local/bin/happy"]
CMD ["server", "--listen", "0.0.0.0:3005"]
