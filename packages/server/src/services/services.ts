import type { AuthService } from "./auth-service.js";
import type { ExecService } from "./exec-service.js";
import type { FileService } from "./file-service.js";
import type { ImageResolver } from "./image-resolver.js";
import type { SandboxService } from "./sandbox-service.js";

export interface Services {
  auth: AuthService;
  sandboxes: SandboxService;
  exec: ExecService;
  files: FileService;
  images: ImageResolver;
}
