// Runs graphql-http's server audits against URL with the bearer TOKEN, one JSON line each.
import { serverAudits } from 'graphql-http';
const [url, token] = process.argv.slice(2);
const fetchFn = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
for (const audit of serverAudits({ url, fetchFn })) {
  const result = await audit.fn();
  console.log(JSON.stringify({ id: audit.id, name: audit.name, status: result.status, reason: result.reason ?? null }));
}
