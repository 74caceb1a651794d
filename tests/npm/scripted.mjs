// The scripted model's exact outputs and the tool/JSON schemas its script needs
// (tests/fixtures/SCRIPT.md), shared by the suites that run it in a real llama-server.
// tests/fixtures/SCRIPT.md "Exact outputs"
export const S = {
  greeting: 'Hallo! Ich bin das Skript-Modell. Grüße aus München: Straße, Größe, Übermaß.',
  greetReasoning: 'Der Nutzer grüßt. Ich antworte kurz: 2+2=4.\n',
  greetContent: 'Die Antwort ist 4. Schöne Grüße!',
  final: 'Laut Werkzeug: 21 °C in München, sonnig.',
  weather: {
    city: 'München', street: 'Königstraße 1', days: 3, temperature: -4.5, detailed: true, metric: false,
    tags: ['Größe', 'Übermaß', 'ß'], location: {lat: 48.137, lon: 11.575, country: 'DE'}, note: null,
  },
  time: {timezone: 'Europe/Berlin', format: '24h'},
  json: {
    name: 'Jörg Müller', age: 42, email: null, active: true, scores: [1.5, 2, -3],
    address: {street: 'Hauptstraße 5', city: 'Köln'},
  },
  longPrefix: 'Zähle: eins, zwei, drei',
};

// The lazy tool grammar must accept the scripted arguments in script order (SCRIPT.md "Rules"):
// every property required, listed in script order.
export const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: {
        type: 'object',
        properties: {
          city: {type: 'string'}, street: {type: 'string'}, days: {type: 'integer'}, temperature: {type: 'number'},
          detailed: {type: 'boolean'}, metric: {type: 'boolean'}, tags: {type: 'array', items: {type: 'string'}},
          location: {
            type: 'object',
            properties: {lat: {type: 'number'}, lon: {type: 'number'}, country: {type: 'string'}},
            required: ['lat', 'lon', 'country'],
          },
          note: {type: ['string', 'null']},
        },
        required: ['city', 'street', 'days', 'temperature', 'detailed', 'metric', 'tags', 'location', 'note'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'Current time in a zone',
      parameters: {
        type: 'object',
        properties: {timezone: {type: 'string'}, format: {type: 'string'}},
        required: ['timezone', 'format'],
      },
    },
  },
];

// matches S.json in key order (test_scripted.sh's person schema)
export const PERSON_SCHEMA = {
  type: 'object',
  properties: {
    name: {type: 'string'}, age: {type: 'integer'}, email: {type: ['string', 'null']}, active: {type: 'boolean'},
    scores: {type: 'array', items: {type: 'number'}},
    address: {
      type: 'object', properties: {street: {type: 'string'}, city: {type: 'string'}},
      required: ['street', 'city'], additionalProperties: false,
    },
  },
  required: ['name', 'age', 'email', 'active', 'scores', 'address'],
  additionalProperties: false,
};
