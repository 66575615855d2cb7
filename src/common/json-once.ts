/**
 * The JSON of objects that many answers share: a commit that wakes thousands of waits hands those
 * that end alike one result object (see SharedResults), and each such object is serialised once,
 * however many responses carry it. Only for objects that are never modified once built; the string
 * lives as long as its object.
 */
const serialised = new WeakMap<object, string>();

export function stringifyOnce(value: object): string {
  let json = serialised.get(value);
  if (json === undefined) serialised.set(value, (json = JSON.stringify(value)));
  return json;
}
