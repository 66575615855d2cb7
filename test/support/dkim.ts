import { generateKeyPairSync } from 'node:crypto';
import { dkimSign } from 'mailauth';

/** A DKIM key pair: the PEM private key to sign with and the `selector._domainkey` TXT record. */
export function dkimKey(): { privateKey: string; record: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const der = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    record: `v=DKIM1; k=rsa; p=${der}`,
  };
}

/** `raw` with a DKIM-Signature of `domain` (key `selector._domainkey.<domain>`) prepended. */
export async function dkimSigned(
  raw: string,
  signer: { domain: string; selector: string; privateKey: string },
): Promise<string> {
  const key = { signingDomain: signer.domain, selector: signer.selector, privateKey: signer.privateKey };
  // mailauth 4 signs with `signatureData` only; its typings also demand the fields at the top level.
  const { signatures, errors } = await dkimSign(raw, {
    ...key,
    canonicalization: 'relaxed/relaxed',
    signatureData: [key],
    // Without a fixed time mailauth reads the clock twice, for the signed `t=` and the written one:
    // about one signature in a thousand straddles a second and does not verify.
    signTime: new Date(),
  });
  if (errors.length > 0 || !signatures.startsWith('DKIM-Signature:')) {
    throw new Error(`DKIM signing failed: ${JSON.stringify(errors)}`);
  }
  return signatures + raw;
}
