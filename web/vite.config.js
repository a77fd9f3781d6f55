// Builds the dashboard into $TY_WEB_OUT (the CMake build directory's web/, never into git):
// index.html plus content-hashed files under assets/, which trainyard-server serves.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  build: {
    outDir: process.env.TY_WEB_OUT || 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2020',
    chunkSizeWarningLimit: 1000,
  },
});
