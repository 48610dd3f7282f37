# Mailroom's image. Build: `docker build -t mailroom .`; run it as README's "Deploy" section says.
# NODE_IMAGE names the Node base (a mirror, or a pinned digest) for both stages.
ARG NODE_IMAGE=node:20-bookworm-slim

# Build stage: every dependency, the esbuild bundle, then only production dependencies kept.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# better-sqlite3 compiles from source wherever its prebuilt binary cannot be downloaded.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
COPY client/package.json client/
RUN npm ci --no-audit --no-fund
COPY server server
COPY scripts/build.mjs scripts/
# The dashboard's bundle is built from its sources and the client package's.
COPY dashboard dashboard
COPY client/*.ts client/
# The image runs the bundle, so neither esbuild (only npm start's build needs it) nor the workspace
# link to the client (not copied into the image) are kept; /data becomes the volume's mount point.
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/esbuild node_modules/@esbuild node_modules/.bin/esbuild node_modules/mailroom-client \
    node_modules/better-sqlite3/deps node_modules/better-sqlite3/src node_modules/better-sqlite3/build/Release/obj* \
 && mkdir -p /data

# Final stage: Node, production dependencies and the bundle; runs as the image's unprivileged `node` user.
FROM ${NODE_IMAGE}
# MALLOC_ARENA_MAX as `npm start` sets it; README says why, under "Without containers".
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/build build
# The contract as the server reads and serves it: the bundle, beside its reference page.
COPY generated/openapi.yaml generated/docs.html generated/
COPY --from=build --chown=node:node /data /data
USER node
VOLUME /data
EXPOSE 3000
# No curl in a slim image: Node's own fetch asks /health.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/health`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node is PID 1 and handles SIGTERM itself: it drains for up to SHUTDOWN_GRACE_MS, then exits 0.
# Give it longer than that to stop (docker stop -t, compose's stop_grace_period) before SIGKILL.
CMD ["node", "--enable-source-maps", "build/main.js"]
