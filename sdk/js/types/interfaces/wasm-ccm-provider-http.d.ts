declare module 'wasm-ccm:provider/http@0.2.2' {
  /**
   * Send one request and wait for the whole response.
   */
  export function send(request: Request): Response;
  /**
   * HTTP request method.
   * # Variants
   * 
   * ## `"get"`
   * 
   * ## `"head"`
   * 
   * ## `"post"`
   * 
   * ## `"put"`
   * 
   * ## `"patch"`
   * 
   * ## `"delete"`
   * 
   * ## `"options"`
   */
  export type Method = 'get' | 'head' | 'post' | 'put' | 'patch' | 'delete' | 'options';
  export interface Request {
    method: Method,
    /**
     * Absolute `http://` or `https://` URL.
     */
    url: string,
    headers: Array<[string, string]>,
    body: Uint8Array,
    /**
     * Give up after this many milliseconds; the host caps it by the call's deadline.
     */
    timeoutMs?: number,
  }
  export interface Response {
    status: number,
    headers: Array<[string, string]>,
    body: Uint8Array,
  }
  /**
   * Why no response came back. An HTTP error status is a `response`, not an `http-error`.
   */
  export type HttpError = HttpErrorDenied | HttpErrorTimeout | HttpErrorConnect | HttpErrorTooLarge | HttpErrorInvalid;
  /**
   * The egress policy refused the destination; the text names the grant to add.
   */
  export interface HttpErrorDenied {
    tag: 'denied',
    val: string,
  }
  /**
   * No complete response within the time allowed.
   */
  export interface HttpErrorTimeout {
    tag: 'timeout',
    val: string,
  }
  /**
   * Could not connect (DNS, refused, TLS).
   */
  export interface HttpErrorConnect {
    tag: 'connect',
    val: string,
  }
  /**
   * The response was larger than the host allows.
   */
  export interface HttpErrorTooLarge {
    tag: 'too-large',
    val: string,
  }
  /**
   * The request itself is malformed (bad URL, header or method).
   */
  export interface HttpErrorInvalid {
    tag: 'invalid',
    val: string,
  }
}
