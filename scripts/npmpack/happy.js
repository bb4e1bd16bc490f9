#!/usr/bin/env node
// The `happy` command of the npm package: it finds the happy binary that npm
// installed with this package (the optional dependency for this platform,
// chosen by its "os" and "cpu" fields) and runs it with the same arguments,
// standard streams and exit status. No install script, no download.
'use strict';

const { spawn } = require('node:child_process');
const path = require('node:path');

const root = require('../package.json');
const platform = `${process.platform}-${process.arch}`;
const name = `${root.name}-${platform}`;

if (process.platform === 'win32') {
  console.error('happy: Windows is not supported yet; run happy inside WSL (Windows Subsystem for Linux), where the Linux build works');
  process.exit(1);
}
if (!root.optionalDependencies || !(name in root.optionalDependencies)) {
  const known = Object.keys(root.optionalDependencies || {}).map((n) => n.slice(root.name.length + 1));
  console.error(`happy: no build for ${platform} (builds: ${known.join(', ')}); build it from source with Go: go install github.com/happy-dev/happy/cmd/happy@latest`);
  process.exit(1);
}

let binary;
try {
  binary = path.join(path.dirname(require.resolve(`${name}/package.json`)), 'bin', 'happy');
} catch (err) {
  console.error(`happy: the package ${name} is not installed (npm skips optional dependencies with --omit=optional or --no-optional); install ${root.name} again without it, or install ${name}@${root.version} too`);
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: 'inherit' });

// A terminal's Ctrl-C and Ctrl-\ reach happy directly (same process group);
// this process only waits. Signals sent to this process alone are passed on.
for (const sig of ['SIGINT', 'SIGQUIT']) process.on(sig, () => {});
for (const sig of ['SIGTERM', 'SIGHUP', 'SIGUSR2']) {
  process.on(sig, () => child.kill(sig));
}

child.on('error', (err) => {
  console.error(`happy: cannot run ${binary}: ${err.message}`);
  process.exit(1);
});
child.on('exit', (code, signal) => {
  if (signal) {
    // Die of the same signal, so that the caller sees what happy saw.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code);
});
