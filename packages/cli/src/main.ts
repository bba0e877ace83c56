#!/usr/bin/env node
import { processContext } from "./context.js";
import { runCli } from "./program.js";

process.exitCode = await runCli(process.argv.slice(2), processContext());
