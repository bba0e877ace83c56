// dns-packet's tables of record types and classes (names <-> numbers), which its own type
// declarations leave out.
declare module "dns-packet/types.js" {
  const types: { toString(type: number): string; toType(name: string): number };
  export default types;
}
declare module "dns-packet/classes.js" {
  const classes: { toString(klass: number): string; toClass(name: string): number };
  export default classes;
}
