#!/usr/bin/env node
// The `bolide` command of the npm package: runs the prebuilt binary of this platform, which the
// optional dependency @bolide/PLATFORM carries (one package per platform, npm installs the one
// that matches). Arguments, stdin, stdout, stderr and the exit code pass through untouched.
'use strict';

const { spawn } = require('child_process');

const PACKAGES = {
  'linux x64': '@bolide/linux-x64',
  'linux arm64': '@bolide/linux-arm64',
};

function binary() {
  // For a binary built elsewhere (and for testing the wrapper itself).
  if (process.env.BOLIDE_BINARY) return process.env.BOLIDE_BINARY;
  const platform = `${process.platform} ${process.arch}`;
  const pkg = PACKAGES[platform];
  if (!pkg) {
    process.stderr.write(
      `bolide: no prebuilt binary for ${platform} (there are: ${Object.keys(PACKAGES).join(', ')}); ` +
        'build it from source: in a clone of bolide\'s repository, `cargo install --locked --path crates/bolide`\n'
    );
    process.exit(3);
  }
  try {
    return require.resolve(`${pkg}/bin/bolide`);
  } catch (e) {
    process.stderr.write(
      `bolide: the package ${pkg}, which carries the binary for ${platform}, is not installed; ` +
        'reinstall without --omit=optional (or --no-optional)\n'
    );
    process.exit(3);
  }
}

// BOLIDE_PARENT_DEATH asks bolide to stop when this wrapper dies, even by SIGKILL (a cancelled CI
// job), so that no load generator is left running without its parent.
const env = Object.assign({}, process.env, { BOLIDE_PARENT_DEATH: String(process.pid) });
const child = spawn(binary(), process.argv.slice(2), { stdio: 'inherit', env });
// A signal sent to this process alone (kill PID) reaches bolide too; one from a terminal reaches
// both, and bolide counts a signal repeated within a second once.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => child.kill(signal));
}
child.on('error', (e) => {
  process.stderr.write(`bolide: cannot run ${e.path || 'the binary'}: ${e.message}\n`);
  process.exit(3);
});
child.on('exit', (code, signal) => {
  if (signal) {
    // Leave the way bolide left: by the same signal.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code);
  }
});
