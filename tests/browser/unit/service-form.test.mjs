// The service page's parameters form: fields made from a plan's JSON
// Schema, values read back with every problem in words, and the field a
// broker's 400 names.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { dnsLabelProblem, dnsSubdomainProblem, formFields, kubeconfigProblem, readParameters, serverFieldError } from '../../../webui/js/service-form.js';

const schema = {
  $schema: 'http://json-schema.org/draft-04/schema#',
  type: 'object',
  properties: {
    size: { type: 'integer', minimum: 1, maximum: 64, description: 'Disk in GiB.' },
    version: { type: 'string', enum: ['8.0', '8.4'], default: '8.4' },
    name: { type: 'string', minLength: 3, maxLength: 8, pattern: '^[a-z]+$', title: 'Database name' },
    ratio: { type: 'number', minimum: 0, exclusiveMaximum: true, maximum: 1 },
    backups: { type: 'boolean', default: true },
    tuning: { type: 'object', properties: { buffer: { type: 'integer' } } },
    either: { oneOf: [{ type: 'string' }, { type: 'integer' }] },
  },
  required: ['size', 'name'],
  additionalProperties: false,
};

test('each property gets the control its type asks for; what a form cannot show falls back to JSON', () => {
  const form = formFields(schema);
  assert.equal(form.whole, false);
  const kinds = Object.fromEntries(form.fields.map((f) => [f.name, f.kind]));
  assert.deepEqual(kinds, { size: 'integer', version: 'enum', name: 'string', ratio: 'number', backups: 'boolean', tuning: 'json', either: 'json' });
  const by = Object.fromEntries(form.fields.map((f) => [f.name, f]));
  assert.equal(by.size.required, true);
  assert.equal(by.version.required, false);
  assert.equal(by.name.label, 'Database name', 'the title labels the field');
  assert.equal(by.version.initial, 1, 'the default option is chosen');
  assert.equal(by.backups.initial, true);
  assert.equal(by.size.hint, 'Disk in GiB. A whole number, at least 1, at most 64.');
  assert.equal(by.ratio.hint, 'A number, at least 0, below 1.', 'draft-04 exclusiveMaximum');
  assert.equal(by.name.hint, 'At least 3 characters, at most 8 characters, matching ^[a-z]+$.');
});

test('a schema that is not a plain object of properties is one JSON field', () => {
  for (const odd of [{ $schema: 'x', oneOf: [{ type: 'object' }] }, { type: 'array' }, { type: 'object', patternProperties: { '^a': {} } }]) {
    const form = formFields(odd);
    assert.equal(form.whole, true, JSON.stringify(odd));
    assert.deepEqual(readParameters(form, { '': '{"a": 1}' }), { parameters: { a: 1 } });
    assert.deepEqual(readParameters(form, { '': '[1]' }), { errors: { '': 'Must be a JSON object, such as {"size": 1}' } });
    assert.match(readParameters(form, { '': '{a' }).errors[''], /^Not valid JSON: /);
  }
  assert.deepEqual(formFields(undefined), { whole: false, fields: [] }, 'no schema: no parameters');
});

test('values are read back as the parameters object, every problem at once', () => {
  const form = formFields(schema);
  const good = { size: ' 10 ', version: '0', name: 'orders', ratio: '0.5', backups: false, tuning: '{"buffer": 2}', either: '' };
  assert.deepEqual(readParameters(form, good), { parameters: { size: 10, version: '8.0', name: 'orders', ratio: 0.5, backups: false, tuning: { buffer: 2 } } });
  const bad = { size: '1.5', version: '', name: 'AB', ratio: '1', backups: true, tuning: '{', either: '' };
  const { errors } = readParameters(form, bad);
  assert.equal(errors.size, 'A whole number, such as 1');
  assert.equal(errors.name, 'At least 3 characters (this has 2)');
  assert.equal(errors.ratio, 'Must be below 1');
  assert.match(errors.tuning, /^Not valid JSON/);
  assert.equal(errors.version, undefined, 'an optional enum may stay unset');
  assert.deepEqual(readParameters(form, { ...good, size: '', name: '' }).errors, { size: 'Required', name: 'Required' });
  assert.equal(readParameters(form, { ...good, size: '65' }).errors.size, 'At most 64');
  assert.equal(readParameters(form, { ...good, name: 'abcdefghi' }).errors.name, 'At most 8 characters (this has 9)');
  assert.equal(readParameters(form, { ...good, name: 'ab-cd' }).errors.name, 'Must match the pattern ^[a-z]+$');
  assert.equal(readParameters(form, { ...good, ratio: 'x' }).errors.ratio, 'A number, such as 1.5');
});

test('a broker 400 is put beside the field its description names', () => {
  const names = ['size', 'name', 'tuning', 'context.peering.kubeconfig'];
  assert.deepEqual(serverFieldError('parameters.size: want integer, but got string', names), { field: 'size', words: 'want integer, but got string' });
  assert.deepEqual(serverFieldError('parameters.tuning.buffer: want integer', names), { field: 'tuning', words: 'want integer' });
  assert.deepEqual(serverFieldError("parameters: missing properties 'name'", names), { field: 'name', words: "Required (missing properties 'name')" });
  assert.deepEqual(serverFieldError('context.peering.kubeconfig: is not a kubeconfig', names), { field: 'context.peering.kubeconfig', words: 'is not a kubeconfig' });
  assert.equal(serverFieldError("parameters: additionalProperties 'colour' not allowed", names).field, null);
  assert.equal(serverFieldError('service_id: no service', names).field, null);
  assert.equal(serverFieldError('the plan is sold out', names).field, null);
  assert.equal(serverFieldError('parameters.size: bad', ['']).field, '', 'a whole-JSON form owns every parameter');
});

test('namespace, Secret name and kubeconfig checks', () => {
  assert.equal(dnsLabelProblem('orders'), null);
  assert.match(dnsLabelProblem('Orders'), /Lower-case/);
  assert.equal(dnsLabelProblem(''), 'Required');
  assert.equal(dnsSubdomainProblem('db.credentials'), null);
  assert.match(dnsSubdomainProblem('db_credentials'), /Lower-case/);
  assert.match(kubeconfigProblem('  '), /^Required/);
  assert.match(kubeconfigProblem('x'.repeat(33 * 1024)), /^At most 32 KiB/);
  assert.equal(kubeconfigProblem('apiVersion: v1\nkind: Config\n'), null);
});
