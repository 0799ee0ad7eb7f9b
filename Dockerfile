# The worker image: Node 20, dependencies from the lock file (better-sqlite3 builds from source).
FROM node:20-bookworm
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund
COPY bin ./bin
COPY src ./src
COPY migrations ./migrations
COPY tsconfig.json ./
USER node
EXPOSE 9464
ENTRYPOINT ["node", "bin/pending-projector.js"]
CMD ["worker"]
