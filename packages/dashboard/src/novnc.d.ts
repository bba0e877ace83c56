// The part of noVNC's RFB class (@novnc/novnc ships no types) the desktop viewer uses.
declare module "@novnc/novnc" {
  export default class RFB extends EventTarget {
    constructor(target: HTMLElement, url: string, options?: { shared?: boolean; wsProtocols?: string[] });
    viewOnly: boolean;
    scaleViewport: boolean;
    focusOnClick: boolean;
    disconnect(): void;
  }
}
