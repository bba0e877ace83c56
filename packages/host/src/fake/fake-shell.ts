/**
 * The few commands the fake host's exec understands: enough for the conformance suite and
 * service tests, nothing more. `echo`, `cat`, `true`, `false`, `exit N`, `sleep N`, `pwd`,
 * `echo ... > FILE` and `>> FILE`, joined by `&&` or `;`; `cat` alone copies stdin; `poweroff`
 * (and `reboot`) end the machine as a guest that powered off would;
 * `[busybox] nc -l|-ll -p PORT -e cat` listens on PORT of the machine (an echo, until signalled:
 * the fake's nc keeps listening either way). Anything else exits 127.
 */
export interface ShellFs {
  read(path: string): Buffer | undefined;
  write(path: string, data: Buffer, append: boolean): void;
}

export interface ShellResult {
  stdout: string;
  stderr: string;
  code: number;
  /** Milliseconds the command says it takes (`sleep`). */
  sleepMs: number;
  /** The guest powers off (or reboots) once the command answered. */
  poweroff: boolean;
  /** A TCP port the command echoes on until it is signalled (`nc -l -p PORT -e cat`). */
  listen?: number;
}

/** `nc -l|-ll -p PORT -e cat`: the port, else undefined. */
function echoPort(args: string[]): number | undefined {
  const [l, p, port, e, prog, ...rest] = args;
  const ok = (l === "-l" || l === "-ll") && p === "-p" && e === "-e" && prog === "cat" && rest.length === 0;
  const n = Number(port);
  return ok && Number.isInteger(n) && n > 0 && n < 65536 ? n : undefined;
}

/** Splits on blanks, honouring single and double quotes (no escapes beyond that). */
function words(line: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  for (let m = re.exec(line); m; m = re.exec(line)) out.push(m[1] ?? m[2] ?? m[3] ?? "");
  return out;
}

function one(argv: string[], fs: ShellFs, cwd: string, out: ShellResult, stdin: Buffer): number {
  const redirect = argv.findIndex((w) => w === ">" || w === ">>");
  let target: { path: string; append: boolean } | null = null;
  if (redirect >= 0) {
    target = { path: argv[redirect + 1] ?? "", append: argv[redirect] === ">>" };
    argv = argv.slice(0, redirect);
  }
  let text = "";
  let code = 0;
  const [cmd, ...args] = argv;
  if (cmd === "busybox" && args[0] === "nc") return one(args, fs, cwd, out, stdin);
  switch (cmd) {
    case "nc": {
      const port = echoPort(args);
      if (port === undefined) {
        out.stderr += "nc: the fake host knows only nc -l -p PORT -e cat\n";
        return 1;
      }
      out.listen = port;
      break;
    }
    case "echo":
      text = `${args.join(" ")}\n`;
      break;
    case "cat": {
      if (args.length === 0) text = stdin.toString("utf8");
      for (const f of args) {
        const data = fs.read(f);
        if (data === undefined) {
          out.stderr += `cat: ${f}: No such file or directory\n`;
          code = 1;
        } else text += data.toString("utf8");
      }
      break;
    }
    case "true":
      break;
    case "false":
      code = 1;
      break;
    case "exit":
      code = Number(args[0] ?? 0);
      break;
    case "sleep":
      out.sleepMs += Number(args[0] ?? 0) * 1000;
      break;
    case "pwd":
      text = `${cwd}\n`;
      break;
    case "poweroff":
    case "reboot":
      out.poweroff = true;
      break;
    default:
      out.stderr += `${cmd ?? ""}: not found (fake host)\n`;
      return 127;
  }
  if (target) fs.write(target.path, Buffer.from(text), target.append);
  else out.stdout += text;
  return code;
}

/** Runs a shell line or an argv (`sh -c LINE` is the line). */
export function runFakeCommand(
  spec: { argv?: string[]; shell?: string; cwd?: string },
  fs: ShellFs,
  stdin: Buffer = Buffer.alloc(0),
): ShellResult {
  const out: ShellResult = { stdout: "", stderr: "", code: 0, sleepMs: 0, poweroff: false };
  const cwd = spec.cwd ?? "/root";
  const argv = spec.argv ?? [];
  const viaShell = (argv[0] === "sh" || argv[0] === "bash") && argv[1] === "-c";
  const line = spec.shell !== undefined ? spec.shell : viaShell ? (argv[2] ?? "") : null;
  if (line === null) {
    out.code = one(argv, fs, cwd, out, stdin);
    return out;
  }
  // `a && b` stops at a failure, `a ; b` does not.
  for (const part of line.split(/(&&|;)/)) {
    const p = part.trim();
    if (p === "&&") {
      if (out.code !== 0) break;
      continue;
    }
    if (p === ";" || p === "") continue;
    out.code = one(words(p), fs, cwd, out, stdin);
    if (/^exit\b/.test(p)) break;
  }
  return out;
}
