import type { HostImages } from "@sandtree/host";

export type { ImageSummary, ResolvedImage } from "@sandtree/host";

/** The server's images: its host's (MachineHost.images); a test gives its host ones that never pull. */
export type ImageResolver = HostImages;
