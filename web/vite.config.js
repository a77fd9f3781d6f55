// Builds the dashboard into $TY_WEB_OUT (the CMake build directory's web/, never into git):
// index.html plus content-hashed files under assets/, which trainyard-server serves. The module
// `vocab` (statuses and the other names of common/vocab.h) is $TY_VOCAB_JS, which vocab-dump
// writes into the build directory (<build>/vocab/vocab.js) before this runs.
import { defineConfig } from 'vite';

if (!process.env.TY_VOCAB_JS) {
  throw new Error('TY_VOCAB_JS is not set: build the dashboard through CMake (web/build.sh), which writes <build>/vocab/vocab.js');
}

export default defineConfig({
  base: '/',
  resolve: {
    alias: { vocab: process.env.TY_VOCAB_JS },
  },
  build: {
    outDir: process.env.TY_WEB_OUT || 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2020',
    chunkSizeWarningLimit: 1000,
  },
});
