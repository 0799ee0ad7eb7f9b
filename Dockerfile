# The worker image: Node 20, dependencies from the lock file, no install script downloading anything.
FROM node:20-bookworm
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: better-sqlite3's install script would fetch a prebuilt binary from GitHub, and
# esbuild's postinstall fetches its binary when @esbuild/<platform> is missing. Optional dependencies
# are kept, so that package (esbuild's binary, which tsx needs at run time) comes from the lock file.
# better-sqlite3 is then compiled from source against the headers of the image's own Node.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error \
 && npm_config_build_from_source=true npm_config_nodedir="$(node -p 'require("path").resolve(process.execPath, "../..")')" \
    npm rebuild better-sqlite3 --loglevel=error \
 && npm cache clean --force
COPY bin ./bin
COPY src ./src
COPY migrations ./migrations
COPY tsconfig.json ./
# The code stays root-owned and read-only to the worker; the SQLite database lives in a volume the
# worker owns (a named volume takes this directory's owner when it is first created).
RUN mkdir /app/data && chown node:node /app/data
VOLUME /app/data
ENV DATABASE_URL=sqlite:/app/data/pending-projector.db
USER node
EXPOSE 9464
ENTRYPOINT ["node", "bin/pending-projector.js"]
CMD ["worker"]
